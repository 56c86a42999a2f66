"""Periodic upkeep of postings (C5): set-based UPDATEs in batches, idempotent, safe to overlap;
the webhook events of what changed are written in the same transaction (C12)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import REFRESH_DAYS, utcnow
from models.db.entities import Employer, Job
from models.db.feed import stamp
from models.db.unit_of_work import session_scope
from models.jobs import events as job_events
from models.notifications import queue as notifications

# Overlapping runs (two beats, a manual `jobpost tasks run` beside the beat) take turns on
# PostgreSQL: two set-based UPDATEs whose plans visit the same rows in different orders
# deadlock, and one of them would fail. The lock ends with the transaction.
UPKEEP_LOCK = 0x6A6F62706F7374  # "jobpost"


def _take_turns(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(UPKEEP_LOCK)))


# Jobs a transaction of the scheduled upkeep changes at most: each batch commits in a small
# part of CHANGE_FEED_LAG_SECONDS (C10), where one UPDATE of every due job could take longer
# than the lag on a large database and be rolled back by the feed's check (models.db.feed).
BATCH = 1000


def expire(session: Session, *, today: date, limit: int | None = None) -> int:
    """Active jobs whose closeDate is before today become archived (active through it), and
    a `job.expired` event for each, in the same transaction (C12); with `limit`, at most that
    many (`in_batches`)."""
    _take_turns(session)
    due = (Job.status == "active", Job.close_date < today)
    now = stamp(session)
    archived = _update(session, due, limit, now, Job.close_date, status="archived")
    job_events.announce(session, "job.expired", archived, now=now, close_date=True)
    notifications.jobs_changed(session, deleted=[row.id for row in archived], now=now)  # C18
    return len(archived)


def refresh(session: Session, *, today: date, limit: int | None = None) -> int:
    """Active auto-refresh jobs of unlimited-plan employers, published 7+ days ago, get
    publishDate = today; closeDate is left alone. Run after expire: `expire_and_refresh`."""
    _take_turns(session)
    unlimited = select(Employer.id).where(Employer.plan == "unlimited")
    due = (
        Job.status == "active",
        Job.auto_refresh.is_(True),
        Job.publish_date <= today - timedelta(days=REFRESH_DAYS),
        Job.employer_id.in_(unlimited),
    )
    now = stamp(session)
    refreshed = _update(session, due, limit, now, publish_date=today)
    job_events.announce(session, "job.refreshed", refreshed, now=now)  # C12
    notifications.jobs_changed(session, updated=[row.id for row in refreshed], now=now)  # C18
    return len(refreshed)


def scan_expiring(session: Session, *, today: date) -> int:
    """The daily `job.expiring` events (C12), after expiry and refresh."""
    _take_turns(session)
    return len(job_events.scan_expiring(session, today=today, now=utcnow()))


def _update(
    session: Session,
    due: tuple[Any, ...],
    limit: int | None,
    now: datetime,
    *returning: Any,
    **values: Any,
) -> list[Any]:
    """One set-based UPDATE of the due jobs (at most `limit`, any of them: a job done no
    longer matches), stamped for the change feed after the turn was taken (C10); the rows
    changed, for their events (C12)."""
    statement = update(Job).where(*due)
    if limit is not None:
        statement = statement.where(Job.id.in_(select(Job.id).where(*due).limit(limit)))
    return list(
        session.execute(
            statement.values(**values, updated_at=now, version=Job.version + 1)
            .returning(Job.id, Job.employer_id, *returning)
            .execution_options(synchronize_session=False)
        ).all()
    )


def in_batches(
    factory: sessionmaker[Session], step: Callable[..., int], *, today: date, batch: int = BATCH
) -> int:
    """`expire` or `refresh` in transactions of at most `batch` jobs each, until none is due."""
    total = 0
    while True:
        with session_scope(factory) as session:
            done = step(session, today=today, limit=batch)
        total += done
        if done < batch:
            return total


@dataclass(frozen=True)
class Refreshed:
    expired: int
    refreshed: int
    expiring: int = 0  # job.expiring events emitted


def expire_and_refresh(factory: sessionmaker[Session], *, today: date) -> Refreshed:
    """The refresh as the service runs it (C5): expiry first, so that a job past its close
    date is archived, never re-published. Each batch commits on its own: held in one
    transaction, overlapping runs (two beats) lock the rows of both steps in different
    orders and deadlock on PostgreSQL."""
    expired = in_batches(factory, expire, today=today)
    refreshed = in_batches(factory, refresh, today=today)
    with session_scope(factory) as session:
        return Refreshed(expired, refreshed, scan_expiring(session, today=today))
