"""The delivery outbox (C8): claims with a lease, retries kept in the database.

Every transition is one conditional UPDATE, so it behaves the same on SQLite and
PostgreSQL and holds no lock while a worker talks to the SMTP server.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import Session

from models.entities import Application, OutboxEntry


@dataclass(frozen=True)
class Timing:
    lease_seconds: float = 300
    sweep_grace_seconds: float = 120
    retry_base_seconds: float = 60
    retry_hours: float = 24


def _claimable(now: datetime) -> ColumnElement[bool]:
    return or_(
        and_(OutboxEntry.status == "pending", OutboxEntry.next_attempt_at <= now),
        and_(OutboxEntry.status == "sending", OutboxEntry.lease_until < now),
    )


def claim(session: Session, application_id: int, *, now: datetime, timing: Timing) -> bool:
    """pending (due) or sending (lease run out) → sending, one attempt more; True if won."""
    result = session.execute(
        update(OutboxEntry)
        .where(OutboxEntry.application_id == application_id, _claimable(now))
        .values(
            status="sending",
            attempts=OutboxEntry.attempts + 1,
            lease_until=now + timedelta(seconds=timing.lease_seconds),
        )
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount) == 1  # type: ignore[attr-defined]


def _finish(session: Session, application_id: int, **values: object) -> bool:
    result = session.execute(
        update(OutboxEntry)
        .where(OutboxEntry.application_id == application_id, OutboxEntry.status == "sending")
        .values(lease_until=None, **values)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount) == 1  # type: ignore[attr-defined]


def mark_sent(session: Session, application_id: int, *, now: datetime) -> bool:
    return _finish(session, application_id, status="sent", sent_at=now, last_error=None)


def mark_failed(session: Session, application_id: int, error: str) -> bool:
    return _finish(session, application_id, status="failed", last_error=error[:2000])


def backoff(attempts: int, timing: Timing, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter over the upper half: base * 2^(n-1) * [0.5, 1]."""
    delay = timing.retry_base_seconds * 2 ** max(attempts - 1, 0)
    jitter: float = (rng or random).random()
    return float(min(delay, 6 * 3600) * (0.5 + 0.5 * jitter))


def mark_retry(
    session: Session,
    application_id: int,
    error: str,
    *,
    now: datetime,
    received_at: datetime,
    attempts: int,
    timing: Timing,
) -> str:
    """A transient failure: pending again at a later time, or failed once retries run out."""
    next_at = now + timedelta(seconds=backoff(attempts, timing))
    if next_at > received_at + timedelta(hours=timing.retry_hours):
        mark_failed(session, application_id, f"gave up after {attempts} attempts: {error}")
        return "failed"
    _finish(
        session,
        application_id,
        status="pending",
        next_attempt_at=next_at,
        enqueued_at=None,
        last_error=error[:2000],
    )
    return "pending"


def sweep(session: Session, *, now: datetime, timing: Timing, limit: int = 1000) -> list[int]:
    """Entries to enqueue now: pending and due and not enqueued within the grace, or left
    `sending` past their lease (a worker died mid-send). Marks them enqueued (C8)."""
    grace = now - timedelta(seconds=timing.sweep_grace_seconds)
    stale = or_(OutboxEntry.enqueued_at.is_(None), OutboxEntry.enqueued_at < grace)
    due = or_(
        and_(OutboxEntry.status == "pending", OutboxEntry.next_attempt_at <= now, stale),
        and_(OutboxEntry.status == "sending", OutboxEntry.lease_until < now, stale),
    )
    # One statement: a sweep overlapping another waits on its row locks, then finds those
    # rows no longer due (enqueued within the grace) and leaves them alone.
    batch = (
        select(OutboxEntry.application_id)
        .where(due)
        .order_by(OutboxEntry.next_attempt_at)
        .limit(limit)
    )
    marked = session.scalars(
        update(OutboxEntry)
        .where(due, OutboxEntry.application_id.in_(batch.scalar_subquery()))
        .values(enqueued_at=now)
        .returning(OutboxEntry.application_id)
        .execution_options(synchronize_session=False)
    )
    return sorted(marked)


def retry_failed(session: Session, application_id: int | None, *, now: datetime) -> list[int]:
    """Operators: failed entries (one, or all) back to pending, due now."""
    query = select(OutboxEntry.application_id).where(OutboxEntry.status == "failed")
    if application_id is not None:
        query = query.where(OutboxEntry.application_id == application_id)
    ids = list(session.scalars(query))
    if ids:
        session.execute(
            update(OutboxEntry)
            .where(OutboxEntry.application_id.in_(ids))
            .values(status="pending", next_attempt_at=now, enqueued_at=now, attempts=0)
            .execution_options(synchronize_session=False)
        )
    return ids


def counts(session: Session) -> dict[str, int]:
    rows = session.execute(select(OutboxEntry.status, func.count()).group_by(OutboxEntry.status))
    found = {status: int(n) for status, n in rows}
    return {s: found.get(s, 0) for s in ("pending", "sending", "sent", "failed")}


def oldest_pending_age(session: Session, *, now: datetime) -> float:
    """Seconds since the oldest undelivered application arrived (0 when none is waiting)."""
    oldest = session.scalar(
        select(func.min(Application.received_at))
        .join(OutboxEntry)
        .where(OutboxEntry.status.in_(("pending", "sending")))
    )
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # min() bypasses the column type on SQLite
        from datetime import UTC

        oldest = oldest.replace(tzinfo=UTC)
    return max((now - oldest).total_seconds(), 0.0)
