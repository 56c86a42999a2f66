"""Search-engine notifications sent (C18): IndexNow's batches and Google's Indexing API.

Each run claims a channel's due notifications under one lease (models.notifications.queue),
sends them outside any transaction, and marks them: sent on a 2xx, again later with a
backoff on a 429, a 5xx or no answer, failed with the answer recorded on any other 4xx.
Google's requests are counted against the day's quota before they are made, so a crash
costs some of the quota, never more than it. The endpoints are the operator's settings, not
an employer's: a plain connection pool, with timeouts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpcore
from google.auth import exceptions as google_errors
from google.auth import transport
from google.oauth2 import service_account
from prometheus_client import Counter
from sqlalchemy import Row
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.unit_of_work import session_scope
from models.notifications import channels
from models.notifications import queue as notifications

log = logging.getLogger("jobpost.search_engines")

SCOPE = "https://www.googleapis.com/auth/indexing"
INDEXNOW_MOST = 10_000  # URLs a request of the protocol holds at most
GOOGLE_BATCH = 100  # Indexing API requests a run makes at most
TIMEOUT = 30.0
OUTCOMES = Counter(
    "jobpost_search_notifications_sent",
    "Search-engine notifications by channel and outcome (sent, retry, failed) (C18).",
    ["channel", "outcome"],
)
# No answer, or one cut short: tried again later, as a 5xx is.
EXCHANGE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    OSError,
)

_POOL = httpcore.ConnectionPool(max_connections=4, retries=0)
_TIMEOUTS = {"connect": 10.0, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}


@dataclass(frozen=True)
class Answer:
    status: int
    text: str


def post(url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
    """One POST; an exchange that fails raises one of EXCHANGE_ERRORS."""
    sent = [(k.encode(), v.encode()) for k, v in headers.items()]
    response = _POOL.request(
        "POST", url, headers=sent, content=body, extensions={"timeout": _TIMEOUTS}
    )
    return Answer(response.status, response.content.decode("utf-8", "replace")[:500])


def post_json(url: str, data: object, headers: Mapping[str, str] | None = None) -> Answer:
    body = json.dumps(data).encode()
    return post(url, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})


class _Response(transport.Response):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return int(self._response.status)

    @property
    def headers(self) -> Mapping[str, str]:
        return {k.decode(): v.decode() for k, v in self._response.headers}

    @property
    def data(self) -> bytes:
        return bytes(self._response.content)


class Request(transport.Request):
    """google-auth's transport over httpcore: it asks the token endpoint for a token."""

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> transport.Response:
        sent = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        try:
            response = _POOL.request(
                method, url, headers=sent, content=body, extensions={"timeout": _TIMEOUTS}
            )
        except EXCHANGE_ERRORS as e:
            raise google_errors.TransportError(str(e) or type(e).__name__) from e  # type: ignore[no-untyped-call]
        return _Response(response)


_CREDENTIALS: dict[str, service_account.Credentials] = {}
_CREDENTIALS_LOCK = threading.Lock()


def token(settings: Settings) -> str:
    """A live access token of the service account (one an hour: kept between runs)."""
    path = str(settings.google_service_account_file)
    with _CREDENTIALS_LOCK:
        credentials = _CREDENTIALS.get(path)
        if credentials is None:
            credentials = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                path, scopes=[SCOPE]
            )
            _CREDENTIALS[path] = credentials
        if not credentials.valid:
            credentials.refresh(Request())
        return str(credentials.token)


def forget_credentials() -> None:
    with _CREDENTIALS_LOCK:
        _CREDENTIALS.clear()


def retried(status: int) -> bool:
    return status == 429 or status >= 500


def timing(settings: Settings) -> notifications.Timing:
    return notifications.Timing(lease_seconds=max(settings.outbox_lease_seconds, 120))


Now = Callable[[], datetime]


def send_indexnow(factory: sessionmaker[Session], settings: Settings, now: Now = utcnow) -> int:
    """One IndexNow request of every due URL, at most the protocol's 10,000: the URLs sent."""
    assert settings.indexnow_key and settings.public_base_url
    with session_scope(factory) as session:
        rows = notifications.claim(
            session, channels.INDEXNOW, now=now(), limit=INDEXNOW_MOST, timing=timing(settings)
        )
    if not rows:
        return 0
    base = settings.public_base_url
    body = {
        "host": urlsplit(base).hostname,
        "key": settings.indexnow_key,
        "keyLocation": f"{base}/{settings.indexnow_key}.txt",
        "urlList": [row.url for row in rows],
    }
    try:
        answer: Answer | None = post_json(settings.indexnow_endpoint, body)
        error = ""
    except EXCHANGE_ERRORS as e:
        answer, error = None, f"no answer from IndexNow: {str(e) or type(e).__name__}"
    with session_scope(factory) as session:
        return _mark(session, channels.INDEXNOW, rows, answer, error, settings, now())


def _mark(
    session: Session,
    channel: str,
    rows: list[Row[Any]],
    answer: Answer | None,
    error: str,
    settings: Settings,
    at: datetime,
) -> int:
    """Mark `rows` by `answer` (None: none came); the rows sent."""
    if answer is not None and 200 <= answer.status < 300:
        sent = notifications.mark_sent(session, rows, status_code=answer.status, now=at)
        OUTCOMES.labels(channel, "sent").inc(sent)
        return sent
    code = None if answer is None else answer.status
    said = error or f"{channel} answered {code}: {answer.text if answer else ''}".strip()
    if answer is None or retried(answer.status):
        found = notifications.mark_retry(
            session, rows, status_code=code, error=said, now=at, timing=timing(settings)
        )
        OUTCOMES.labels(channel, "retry").inc(found["retry"])
        OUTCOMES.labels(channel, "failed").inc(found["failed"])
    else:
        failed = notifications.mark_refused(session, rows, status_code=code, error=said, now=at)
        OUTCOMES.labels(channel, "failed").inc(failed)
    log.warning("%s: %d notifications not sent: %s", channel, len(rows), said)
    return 0


def send_google(factory: sessionmaker[Session], settings: Settings, now: Now = utcnow) -> int:
    """Up to GOOGLE_BATCH due notifications, within the day's quota, each its own request
    to the Indexing API with the service account's token: the URLs sent. A 429 stops the
    run: the rest wait with a backoff."""
    assert settings.google_service_account_file is not None
    quota = settings.google_indexing_daily_quota
    with session_scope(factory) as session:
        at = now()
        granted = notifications.reserve(session, channels.GOOGLE, GOOGLE_BATCH, quota=quota, now=at)
        rows = notifications.claim(
            session, channels.GOOGLE, now=at, limit=granted, timing=timing(settings)
        )
        notifications.give_back(session, channels.GOOGLE, granted - len(rows), now=at)
    if not rows:
        return 0
    try:
        bearer = token(settings)
    except google_errors.GoogleAuthError as e:
        with session_scope(factory) as session:
            return _mark(session, channels.GOOGLE, rows, None, f"no token: {e}", settings, now())
    sent = 0
    for i, row in enumerate(rows):
        try:
            answer: Answer | None = post_json(
                settings.google_indexing_endpoint,
                {"url": row.url, "type": row.kind},
                {"Authorization": f"Bearer {bearer}"},
            )
            error = ""
        except EXCHANGE_ERRORS as e:
            answer, error = None, f"no answer from Google: {str(e) or type(e).__name__}"
        with session_scope(factory) as session:
            if answer is not None and answer.status == 429:  # the quota: the rest wait too
                _mark(session, channels.GOOGLE, rows[i:], answer, error, settings, now())
                return sent
            sent += _mark(session, channels.GOOGLE, [row], answer, error, settings, now())
    return sent


def send(factory: sessionmaker[Session], settings: Settings, now: Now = utcnow) -> dict[str, int]:
    """Each configured channel's due notifications: the URLs sent, by channel."""
    on = channels.of_settings(settings).on
    found: dict[str, int] = {}
    if channels.INDEXNOW in on:
        found[channels.INDEXNOW] = send_indexnow(factory, settings, now)
    if channels.GOOGLE in on:
        found[channels.GOOGLE] = send_google(factory, settings, now)
    return found
