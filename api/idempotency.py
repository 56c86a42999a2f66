"""Idempotency-Key (C10), as a layer around the POST responders that take it.

An operation opts in with `@idempotent(Endpoint(...))` on its responder; the public
application form, whose key is a hidden field of its body, uses `Keys.begin` and `finish`
itself (api.pages). With a key, the order of answers is: 405 and 401 (falcon, the class's
hooks), 413 and 415, 400 (the key, then the body), then the key's own answers (a replay,
409 idempotency_key_in_use, 422 idempotency_key_reused), then the responder's 429, 404 …
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

import falcon
import orjson
from sqlalchemy.orm import Session, sessionmaker

from api import forms, query
from api.body import media_type, parse_json, read_bytes, too_large
from api.errors import Problem
from models import idempotency
from models.applications.service import Upload
from models.core.errors import FieldError
from models.db.unit_of_work import after_commit, session_scope
from models.idempotency import Busy, Claim, Recorded, Scope
from models.syncs import requests as sync_requests

log = logging.getLogger("jobpost.api")

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
KEY = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII, space included
RETRY_AFTER = "1"  # seconds, on 409 idempotency_key_in_use

Responder = Callable[..., None]
ScopeOf = Callable[[falcon.Request, dict[str, Any]], Scope | None]


def dry_run(req: falcon.Request) -> bool:
    """Whether the request asks for a dry run (`?dryRun=true`), which stores nothing and
    records no key (C10): `false`, absent or empty is a real request; anything else is 400
    invalid_query. Only the operations that take dry runs ask."""
    values = req.get_param_as_list("dryRun") or []
    values = [v for v in values if v != ""]  # an empty value means absent (C1)
    if not values:
        return False
    if len(values) == 1 and values[0] in ("true", "false"):
        return values[0] == "true"
    raise query.invalid(
        [FieldError("dryRun", "invalid_format", "dryRun is true or false, given once.")]
    )


def recordable(status: int) -> bool:
    """Only a success is recorded: a 2xx, or the application form's 303 (C10)."""
    return 200 <= status < 300 or status == 303


def check_key(key: str) -> None:
    if not KEY.fullmatch(key):
        raise Problem(
            400,
            "invalid_idempotency_key",
            f"{HEADER} must be 1 to 255 printable ASCII characters; a UUID is a good key.",
        )


def in_use() -> Problem:
    return Problem(
        409,
        "idempotency_key_in_use",
        f"A request with this {HEADER} is still being processed; retry in a second.",
        headers={"Retry-After": RETRY_AFTER},
    )


def reused() -> Problem:
    return Problem(
        422,
        "idempotency_key_reused",
        f"This {HEADER} was used for a different request in the last 24 hours; "
        "use a new key for a new request.",
    )


# --- the request, as the key compares it -----------------------------------------------------


def canonical(value: Any) -> str:
    """JSON text of `value` in one form: members sorted, no whitespace, and each number as
    the value it is (`1`, `1.0` and `1e0` alike), so two bodies that differ only in how they
    are written have the same form."""
    return "".join(canonical_parts(value))


def canonical_parts(value: Any) -> Iterator[str]:
    """`canonical(value)` piece by piece, to be hashed without being held whole; a packed
    sync item (models.syncs.runs.Packed) is read back one at a time, as the item it is."""
    if isinstance(value, sync_requests.Packed):
        yield from canonical_parts(sync_requests.read_item(value.text))
    elif isinstance(value, dict):
        yield "{"
        for i, (k, v) in enumerate(sorted(value.items())):
            yield ("," if i else "") + orjson.dumps(str(k)).decode() + ":"
            yield from canonical_parts(v)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ","
            yield from canonical_parts(v)
        yield "]"
    elif isinstance(value, int | Decimal) and not isinstance(value, bool):
        yield number(value)
    else:
        yield orjson.dumps(value).decode()


def number(value: int | Decimal) -> str:
    """A number's value as coefficient and exponent, trailing zeros removed: exact at any
    precision, and never written out digit by digit (`1e999999999` stays short)."""
    sign, digits, exponent = Decimal(value).as_tuple()
    if not isinstance(exponent, int):  # NaN or Infinity, which parse_json refuses
        raise ValueError(f"{value} is not a JSON number")
    coefficient = "".join(map(str, digits))
    significant = coefficient.rstrip("0")
    if not significant:
        return "0"
    exponent += len(coefficient) - len(significant)
    return f"{'-' if sign else ''}{significant}e{exponent}"


def form_content(fields: dict[str, Any]) -> dict[str, Any]:
    """A multipart body by its fields' names and values, and its files' names and bytes; the
    boundary and the parts' headers do not count."""
    content: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, Upload):
            value = {"filename": value.filename, "sha256": hashlib.sha256(value.data).hexdigest()}
        content[name] = value
    return content


def fingerprint(req: falcon.Request, content: Any) -> str:
    """A hash of the request as the key compares it: the effective method (after a method
    override, C7), the path, the query parameters as sent (in any order) and the content.
    The request itself is not stored."""
    query = sorted(parse_qsl(req.query_string, keep_blank_values=True))
    digest = hashlib.sha256()
    for part in canonical_parts([req.method, req.path, query, content]):
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()


# --- the key's mark and its answers ----------------------------------------------------------


@dataclass
class Held:
    """A claim this request holds; `recorded` once its response is committed."""

    claim: Claim
    recorded: bool = False


class Keys:
    """Middleware: gives the layer its sessions and clock (`req.context.idempotency_keys`),
    and releases a key whose request ended any other way than a recorded success (an error
    answer, an exception, a commit that failed). Listed before SessionManager, its
    process_response runs after the request's transaction has ended."""

    def __init__(self, sessions: sessionmaker[Session], now: Callable[[], datetime]) -> None:
        self.sessions, self.now = sessions, now

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.idempotency_keys = self
        req.context.held = None

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        held: Held | None = getattr(req.context, "held", None)
        if held is None or held.recorded:
            return
        try:
            with session_scope(self.sessions) as session:
                idempotency.release(session, held.claim)
        except Exception:  # its lease lapses in a minute all the same
            log.exception(
                "cannot release an idempotency key",
                extra={"request_id": getattr(req.context, "request_id", None)},
            )

    def begin(
        self,
        req: falcon.Request,
        scope: Scope,
        key: str,
        fingerprint: str,
        *,
        before_claim: Callable[[], None] | None = None,
    ) -> Recorded | Busy | None:
        """Mark the key for this request (None), or the key's own answer. `before_claim` runs
        once the key has no answer of its own and before it is marked: a rate limit's 429
        raised there leaves no mark (C8, C10)."""
        now = self.now()
        held = _open_sqlite_transaction(req)
        if before_claim is not None:
            found = self._look(held, scope, key, fingerprint, now)
            if found is not None:
                return found
            before_claim()
        if held is not None:
            with held.begin_nested():
                outcome = idempotency.claim(held, scope, key, fingerprint, now)
        else:
            with session_scope(self.sessions) as session:
                outcome = idempotency.claim(session, scope, key, fingerprint, now)
        if isinstance(outcome, Claim):
            req.context.held = Held(outcome)
            return None
        return outcome

    def _look(
        self, held: Session | None, scope: Scope, key: str, fingerprint: str, now: datetime
    ) -> Recorded | Busy | None:
        if held is not None:
            return idempotency.look(held, scope, key, fingerprint, now)
        with session_scope(self.sessions) as session:
            return idempotency.look(session, scope, key, fingerprint, now)


def _open_sqlite_transaction(req: falcon.Request) -> Session | None:
    """The request's session, when it is a SQLite transaction already begun (the API key was
    read in it). A SQLite writer holds the whole database from its first statement to its
    end (models.db.unit_of_work), so a mark in a transaction of its own would wait for this one; no
    other request can see or race a mark this one holds, so it goes into a savepoint of the
    request's transaction, which a process that dies rolls back with it."""
    database = getattr(req.context, "db", None)
    session: Session | None = getattr(database, "opened", None)
    if session is None or not session.in_transaction():
        return None
    return session if session.get_bind().dialect.name == "sqlite" else None


def answer(req: falcon.Request, resp: falcon.Response, outcome: Recorded | Busy) -> None:
    """The key's own answer, as the API gives it: the replay, or a problem."""
    if outcome is Busy.IN_FLIGHT:
        raise in_use()
    if outcome is Busy.REUSED:
        raise reused()
    replay(resp, outcome)


def replay(resp: falcon.Response, recorded: Recorded) -> None:
    """The recorded response again, byte for byte, and nothing done again (C10)."""
    resp.status = recorded.status
    resp.data = recorded.body
    for name, value in (
        ("Location", recorded.location),
        ("ETag", recorded.etag),
        ("Content-Type", recorded.content_type),
    ):
        if value is not None:
            resp.set_header(name, value)
    resp.set_header(REPLAYED, "true")


def finish(req: falcon.Request, resp: falcon.Response) -> None:
    """After the responder: record a success in the request's transaction (committed with
    what it created); anything else leaves the key to be released."""
    held: Held | None = req.context.held
    if held is None or not recordable(resp.status_code):
        return
    response = Recorded(
        resp.status_code,
        resp.get_header("Location"),
        resp.get_header("ETag"),
        resp.get_header("Content-Type"),
        resp.render_body() or b"",
    )
    session: Session = req.context.db.session
    created = getattr(req.context, "application_id", None)  # set by the intake (C13)
    if not idempotency.record(session, held.claim, response, application_id=created):
        # This request outlived its lease and another took the key: undo this one's work.
        raise in_use()
    after_commit(session, lambda: setattr(held, "recorded", True))


# --- the layer for JSON (and multipart) operations --------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """An operation that takes Idempotency-Key: the scope of its keys, and the body it takes
    (its size limit, its media types and the 415's detail), read here before the key's
    answers and read again by the responder from what is kept (api.body.read_bytes)."""

    scope: ScopeOf
    limit: int
    media_types: tuple[str, ...]
    media_detail: str
    dry_runs: bool = False  # takes ?dryRun=true (C10), which neither marks nor records a key
    # A rate limit the request is counted against (its 429 raised) before its key is marked;
    # called with the responder's resource and the request.
    rate: Callable[[Any, falcon.Request], None] | None = None
    # The body's own parse, where it has one (the sync runs' packs their items, C11).
    parse: Callable[[falcon.Request], dict[str, Any]] | None = None


def idempotent(endpoint: Endpoint) -> Callable[[Responder], Responder]:
    """Make a POST responder honour Idempotency-Key (C10); without the header it runs as
    before, in C1's order."""

    def decorate(responder: Responder) -> Responder:
        @functools.wraps(responder)
        def keyed(resource: Any, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
            key = req.get_header(HEADER)
            if key is None:
                responder(resource, req, resp, **params)
                return
            content = _read(req, endpoint, key)
            scope = endpoint.scope(req, params)
            if scope is None or (endpoint.dry_runs and dry_run(req)):
                responder(resource, req, resp, **params)
                return
            keys: Keys = req.context.idempotency_keys
            rate = endpoint.rate
            before = None if rate is None else functools.partial(rate, resource, req)
            outcome = keys.begin(req, scope, key, fingerprint(req, content), before_claim=before)
            if outcome is not None:
                answer(req, resp, outcome)
                return
            responder(resource, req, resp, **params)
            finish(req, resp)

        return keyed

    return decorate


def _read(req: falcon.Request, endpoint: Endpoint, key: str) -> Any:
    """413 and 415 from the headers, the key (400) before the body is read, then the body
    (413 for a chunked one, 400): its content, as the key compares it."""
    if req.content_length is not None and req.content_length > endpoint.limit:
        raise too_large(endpoint.limit)
    kind = media_type(req)
    if kind not in endpoint.media_types:
        raise Problem(415, "unsupported_media_type", endpoint.media_detail)
    check_key(key)
    data = read_bytes(req, endpoint.limit)
    if kind == "multipart/form-data":
        return ["form", form_content(forms.parse_multipart(req.content_type or "", data))]
    return ["json", parse_json(data) if endpoint.parse is None else endpoint.parse(req)]
