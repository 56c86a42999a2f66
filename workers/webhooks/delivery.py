"""Delivering one webhook delivery (C12): claim under a lease, sign, POST with no
transaction open, record. Any 2xx succeeds; anything else (a 3xx, a refused address, a
timeout, a closed connection) is a failed attempt that the retry schedule brings round again.
At least once: a crash between the receiver's answer and the record sends it again, with the
same `webhook-id`, for the receiver to de-duplicate."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpcore
from cryptography.fernet import InvalidToken
from prometheus_client import Counter
from sqlalchemy import Row
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.engines import database_said
from models.db.unit_of_work import autocommit_sessions, commit_within_lease, session_scope
from models.webhooks import delivery as deliveries
from models.webhooks import secrets
from models.webhooks.urls import address_allowed, port_allowed, url_port
from workers.delivery import SEND_SHARE_OF_LEASE
from workers.webhooks import client, signing

log = logging.getLogger("jobpost.webhooks")
T = TypeVar("T")

OUTCOMES = Counter(
    "jobpost_webhook_deliveries",
    "Webhook delivery attempts by event type and outcome (succeeded, retry, failed, disabled).",
    ["event", "outcome"],
)
DEFERRED = Counter(
    "jobpost_webhook_deferred",
    "Webhook deliveries due but not attempted: their endpoint or employer had its cap in flight.",
)
# C12: a connection that fails reads the same whatever the reason, so that `lastError` does
# not tell an employer which hosts and ports answer, and which are silent.
CONNECT_ERRORS = (client.Unreachable,)
CONNECT_FAILED = "could not connect to the receiver"
# What may go wrong in the exchange itself: every one is a failed attempt, retried.
EXCHANGE_ERRORS = (
    client.Refused,
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    OSError,
)


def timing(settings: Settings) -> deliveries.Timing:
    return deliveries.Timing(
        lease_seconds=settings.outbox_lease_seconds,
        sweep_grace_seconds=settings.outbox_sweep_grace_seconds,
        schedule=settings.webhook_retry_schedule,
        endpoint_in_flight=settings.webhook_endpoint_in_flight,
        employer_in_flight=settings.webhook_employer_in_flight,
    )


_CLIENTS: dict[bool, client.Client] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(settings: Settings) -> client.Client:
    """One client per process and rule: its TLS context (the system's CAs, 27 ms of CPU to
    load, under the GIL) is made once, not per delivery; contexts are safe across threads.
    Each thread keeps its connection to a receiver for the next delivery there."""
    rule = settings.webhook_allow_private
    with _CLIENTS_LOCK:
        if rule not in _CLIENTS:
            _CLIENTS[rule] = client.Client(
                allowed=lambda ip: address_allowed(ip, allow_private=rule), keep=True
            )
        return _CLIENTS[rule]


def close_clients() -> None:
    """Close the connections every thread keeps (the worker stops)."""
    with _CLIENTS_LOCK:
        for kept in _CLIENTS.values():
            kept.close()


def deliver(
    sessions: sessionmaker[Session],
    settings: Settings,
    delivery_id: int,
    *,
    sender: client.Client | None = None,
    hand_on: Callable[[list[int]], object] | None = None,
) -> str:
    """One attempt. Returns "skipped" (not claimable: finished, not yet due, another
    worker's, its endpoint disabled or deleted), "deferred" (due, but its endpoint or employer
    has its cap in flight: no attempt made or counted), "succeeded", "retry", "failed",
    "disabled" (a 410 disabled the endpoint) or "lost" (the lease was taken over, or it was
    deleted). Once an attempt ends, `hand_on` is given the delivery waiting for its place."""
    t = timing(settings)
    # As for email copies (workers.delivery), each step is one statement; on PostgreSQL they
    # commit by themselves, the claim (and the employer's turn it takes) among them, and no
    # transaction stays open during the POST.
    steps = autocommit_sessions(sessions)
    deferred = False
    with session_scope(steps) as s:
        claimed = deliveries.claim(s, delivery_id, now=utcnow(), timing=t)
        if claimed is None:
            deferred = deliveries.defer(s, delivery_id, now=utcnow())
    if claimed is None:
        if deferred:
            DEFERRED.inc()
        return "deferred" if deferred else "skipped"
    with session_scope(steps) as s:
        outcome, waits = _attempt(s, steps, settings, t, claimed, sender or client_for(settings))
    OUTCOMES.labels(claimed.type, outcome).inc()
    if hand_on is not None and waits:
        _hand_on(steps, t, claimed.endpoint_id, hand_on)
    return outcome


def _hand_on(
    steps: sessionmaker[Session],
    t: deliveries.Timing,
    endpoint_id: int,
    hand_on: Callable[[list[int]], object],
) -> None:
    """Enqueue the delivery that waited for the place this attempt frees; on a database
    error, the sweeper enqueues it instead."""
    try:
        with session_scope(steps) as s:
            waiting = deliveries.next_waiting(s, endpoint_id, now=utcnow(), timing=t)
    except SQLAlchemyError as e:
        log.warning("webhook hand-on after endpoint %s failed: %s", endpoint_id, database_said(e))
        return
    if waiting is not None:
        hand_on([waiting])


def _attempt(
    s: Session,
    steps: sessionmaker[Session],
    settings: Settings,
    t: deliveries.Timing,
    claimed: Row[Any],
    sender: client.Client,
) -> tuple[str, bool]:
    """The outcome, and whether a delivery may wait for the place it frees: after a success
    the mark tells (`mark_succeeded_and_look`); after a failure, the rarer way, it may."""
    lease_left = (claimed.lease_until - utcnow()).total_seconds()
    limit = SEND_SHARE_OF_LEASE * lease_left  # the send ends before the lease does
    body = claimed.payload.encode()
    status: int | None = None
    try:
        signing_secrets = secrets.signing_secrets(claimed, utcnow(), secrets.load_key(settings))
        parts = urlsplit(claimed.url)
        if parts.scheme != "https" and not settings.webhook_allow_http:
            raise client.Refused("the URL is not https")
        port = url_port(parts)
        allow_http, extra = settings.webhook_allow_http, settings.webhook_allowed_ports
        if not port_allowed(port, allow_http=allow_http, extra=extra):
            raise client.Refused(f"port {port} is not allowed")
        headers = signing.headers(claimed.message_id, body, signing_secrets, at=utcnow())
        answer = sender.post(claimed.url, body, headers, limit=limit)
    except (RuntimeError, InvalidToken) as e:  # no key, or not the key it was sealed with
        error = f"the secret cannot be read: {e or type(e).__name__}"
    except CONNECT_ERRORS as e:  # refused, unreachable or timed out: the same words for all
        error = CONNECT_FAILED
        log.info("webhook delivery %s: %s", claimed.id, e)  # the operator's log tells which
    except EXCHANGE_ERRORS as e:
        error = f"{type(e).__name__}: {e}"
    else:
        status = answer.status
        if 200 <= status < 300:
            _, waits = _record(
                s,
                steps,
                claimed,
                lambda x: deliveries.mark_succeeded_and_look(
                    x, claimed, status_code=answer.status, now=utcnow()
                ),
            )
            return "succeeded", waits
        error = f"HTTP {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
    log.info("webhook delivery %s (%s): %s", claimed.id, claimed.message_id, error)
    failed = _record(
        s,
        steps,
        claimed,
        lambda x: deliveries.mark_failed_attempt(
            x, claimed, error=error, status_code=status, now=utcnow(), timing=t
        ),
    )
    return failed, True


def _record(
    s: Session, steps: sessionmaker[Session], claimed: Row[Any], mark: Callable[[Session], T]
) -> T:
    """Record how the attempt went, and commit, within the lease: past it, the sweeper
    hands the delivery to another worker, which sends it again."""
    what = f"webhook delivery {claimed.id}"
    return commit_within_lease(s, steps, mark, lease=claimed.lease_until, what=what, logger=log)
