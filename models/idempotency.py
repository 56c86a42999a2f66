"""Idempotency keys (C10): a key is marked while its first request runs, then holds that
request's response for replay, for 24 hours from its first use.

The mark is taken in a transaction of its own, committed before the request is processed,
so every other request with the key sees it. It is held under a lease: a process that dies
leaves a mark that lapses with its lease, and the next use of the key starts afresh. The
response is recorded in the request's own transaction, with what it created, so a key is
never recorded without its resource nor a resource left without its key.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models.db.entities import IdempotencyKey

LEASE = timedelta(seconds=60)
LIFETIME = timedelta(hours=24)
# A first use that loses its INSERT to another looks again; more than a few rounds means the
# key is being fought over, and the client is told it is in flight.
ATTEMPTS = 3


@dataclass(frozen=True)
class Scope:
    """Whose keys these are: an employer's (`employer`: jobs, syncs) or a job's (`job`: its
    applications). Two scopes may use the same key for different requests."""

    kind: str
    id: int


@dataclass(frozen=True)
class Claim:
    """This request holds the key, until its response is recorded or the key released."""

    scope: Scope
    key: str
    token: str


@dataclass(frozen=True)
class Recorded:
    """A response to replay: the status, the headers C10 names, and the body's bytes."""

    status: int
    location: str | None
    etag: str | None
    content_type: str | None
    body: bytes


class Busy(enum.Enum):
    IN_FLIGHT = "in_flight"  # another request holds the key: try again shortly
    REUSED = "reused"  # the key's recorded response is for a different request


Outcome = Claim | Recorded | Busy


def _row(scope: Scope, key: str) -> list[ColumnElement[bool]]:
    """WHERE terms naming one key of one scope (its primary key)."""
    return [
        IdempotencyKey.scope == scope.kind,
        IdempotencyKey.scope_id == scope.id,
        IdempotencyKey.key == key,
    ]


def _answer(row: IdempotencyKey, fingerprint: str, now: datetime) -> Recorded | Busy | None:
    """The key's own answer for this request, or None when it is free to be taken."""
    if row.status is not None and now < row.first_used_at + LIFETIME:
        if row.fingerprint != fingerprint:
            return Busy.REUSED
        return Recorded(row.status, row.location, row.etag, row.content_type, row.body or b"")
    if row.status is None and now < row.lease_until:
        return Busy.IN_FLIGHT
    return None


def look(
    session: Session, scope: Scope, key: str, fingerprint: str, now: datetime
) -> Recorded | Busy | None:
    """The key's own answer, without marking it: None when a claim would take it. A request
    is counted against a rate limit between the two, so one refused marks no key."""
    row = session.execute(select(IdempotencyKey).where(*_row(scope, key))).scalar_one_or_none()
    return None if row is None else _answer(row, fingerprint, now)


def claim(session: Session, scope: Scope, key: str, fingerprint: str, now: datetime) -> Outcome:
    """Mark `key` for this request, or say why not: its recorded response (for the same
    request), REUSED (for another), or IN_FLIGHT. The caller commits at once."""
    for _ in range(ATTEMPTS):
        row = session.execute(
            select(IdempotencyKey)
            .where(*_row(scope, key))
            .execution_options(populate_existing=True)
        ).scalar_one_or_none()
        token = secrets.token_hex(16)
        if row is None:
            try:
                with session.begin_nested():
                    session.add(
                        IdempotencyKey(
                            scope=scope.kind,
                            scope_id=scope.id,
                            key=key,
                            fingerprint=fingerprint,
                            first_used_at=now,
                            token=token,
                            lease_until=now + LEASE,
                        )
                    )
            except IntegrityError:
                continue  # another request's first use came first: look again
            return Claim(scope, key, token)
        answer = _answer(row, fingerprint, now)
        if answer is not None:
            return answer
        # A mark whose lease lapsed, or a record past its 24 hours: a first use again. The
        # holder's token in the WHERE makes one of several takers win.
        taken = session.execute(
            update(IdempotencyKey)
            .where(*_row(scope, key), IdempotencyKey.token == row.token)
            .values(
                fingerprint=fingerprint,
                first_used_at=now,
                token=token,
                lease_until=now + LEASE,
                status=None,
                location=None,
                etag=None,
                content_type=None,
                body=None,
                application_id=None,
            )
            .execution_options(synchronize_session=False)
        )
        if taken.rowcount == 1:  # type: ignore[attr-defined]
            return Claim(scope, key, token)
    return Busy.IN_FLIGHT


def record(
    session: Session, held: Claim, response: Recorded, *, application_id: int | None = None
) -> bool:
    """Record the response, in the request's transaction, with the application it created
    if any (its erasure deletes the key, C13); False if the key is no longer this request's
    (its lease lapsed and another request took it)."""
    result = session.execute(
        update(IdempotencyKey)
        .where(
            *_row(held.scope, held.key),
            IdempotencyKey.token == held.token,
            IdempotencyKey.status.is_(None),
        )
        .values(
            status=response.status,
            location=response.location,
            etag=response.etag,
            content_type=response.content_type,
            body=response.body,
            application_id=application_id,
        )
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def release(session: Session, held: Claim) -> None:
    """Free the key after an answer that is not recorded; a retry is processed afresh."""
    session.execute(
        delete(IdempotencyKey)
        .where(
            *_row(held.scope, held.key),
            IdempotencyKey.token == held.token,
            IdempotencyKey.status.is_(None),
        )
        .execution_options(synchronize_session=False)
    )


def erase(session: Session, application_ids: list[int]) -> int:
    """Delete the keys whose recorded response created these applications (C13): a retry
    with such a key is then a new request."""
    result = session.execute(
        delete(IdempotencyKey)
        .where(IdempotencyKey.application_id.in_(application_ids))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def purge(session: Session, *, now: datetime) -> int:
    """Delete the keys first used more than 24 hours ago (beat's daily purge, C14); a
    lookup already treats them as unused."""
    result = session.execute(
        delete(IdempotencyKey)
        .where(IdempotencyKey.first_used_at <= now - LIFETIME)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
