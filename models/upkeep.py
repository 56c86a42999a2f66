"""Periodic upkeep of postings (C5): one set-based UPDATE each, idempotent, safe to overlap;
the webhook events of what changed are written in the same transaction (C12)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from models import job_events
from models.dates import REFRESH_DAYS, utcnow
from models.entities import Employer, Job
from models.unit_of_work import session_scope

# Overlapping runs (two beats, a manual `jobpost tasks run` beside the beat) take turns on
# PostgreSQL: two set-based UPDATEs whose plans visit the same rows in different orders
# deadlock, and one of them would fail. The lock ends with the transaction.
UPKEEP_LOCK = 0x6A6F62706F7374  # "jobpost"


def _take_turns(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(UPKEEP_LOCK)))


def expire(session: Session, *, today: date) -> int:
    """Active jobs whose closeDate is before today become archived (active through it), and
    a `job.expired` event for each, in the same transaction (C12, job_events)."""
    _take_turns(session)
    now = utcnow()
    archived = session.execute(
        update(Job)
        .where(Job.status == "active", Job.close_date < today)
        .values(status="archived", updated_at=now, version=Job.version + 1)
        .returning(Job.id, Job.employer_id, Job.close_date)
        .execution_options(synchronize_session=False)
    ).all()
    job_events.announce(session, "job.expired", archived, now=now, close_date=True)
    return len(archived)


def refresh(session: Session, *, today: date) -> int:
    """Active auto-refresh jobs of unlimited-plan employers, published 7+ days ago, get
    publishDate = today; closeDate is left alone. Run after expire: `expire_and_refresh`."""
    _take_turns(session)
    now = utcnow()
    unlimited = select(Employer.id).where(Employer.plan == "unlimited")
    refreshed = session.execute(
        update(Job)
        .where(
            Job.status == "active",
            Job.auto_refresh.is_(True),
            Job.publish_date <= today - timedelta(days=REFRESH_DAYS),
            Job.employer_id.in_(unlimited),
        )
        .values(publish_date=today, updated_at=now, version=Job.version + 1)
        .returning(Job.id, Job.employer_id)
        .execution_options(synchronize_session=False)
    ).all()
    job_events.announce(session, "job.refreshed", refreshed, now=now)  # C12
    return len(refreshed)


def scan_expiring(session: Session, *, today: date) -> int:
    """The daily `job.expiring` events (C12), after expiry and refresh."""
    _take_turns(session)
    return len(job_events.scan_expiring(session, today=today, now=utcnow()))


@dataclass(frozen=True)
class Refreshed:
    expired: int
    refreshed: int
    expiring: int = 0  # job.expiring events emitted


def expire_and_refresh(factory: sessionmaker[Session], *, today: date) -> Refreshed:
    """The refresh as the service runs it (C5): expiry first, so that a job past its close
    date is archived, never re-published. Each step commits on its own: held in one
    transaction, overlapping runs (two beats) lock the rows of both steps in different
    orders and deadlock on PostgreSQL."""
    with session_scope(factory) as session:
        expired = expire(session, today=today)
    with session_scope(factory) as session:
        refreshed = refresh(session, today=today)
    with session_scope(factory) as session:
        return Refreshed(expired, refreshed, scan_expiring(session, today=today))
