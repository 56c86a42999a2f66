"""Periodic upkeep of postings (C5): one set-based UPDATE each, idempotent, safe to overlap."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from models.dates import REFRESH_DAYS, utcnow
from models.entities import Employer, Job


def expire(session: Session, *, today: date) -> int:
    """Active jobs whose closeDate is before today become archived (active through it)."""
    result = session.execute(
        update(Job)
        .where(Job.status == "active", Job.close_date < today)
        .values(status="archived", updated_at=utcnow(), version=Job.version + 1)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def refresh(session: Session, *, today: date) -> int:
    """Active auto-refresh jobs of unlimited-plan employers, published 7+ days ago, get
    publishDate = today; closeDate is left alone. Run after expire: `expire_and_refresh`."""
    unlimited = select(Employer.id).where(Employer.plan == "unlimited")
    result = session.execute(
        update(Job)
        .where(
            Job.status == "active",
            Job.auto_refresh.is_(True),
            Job.publish_date <= today - timedelta(days=REFRESH_DAYS),
            Job.employer_id.in_(unlimited),
        )
        .values(publish_date=today, updated_at=utcnow(), version=Job.version + 1)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Refreshed:
    expired: int
    refreshed: int


def expire_and_refresh(session: Session, *, today: date) -> Refreshed:
    """The refresh as the service runs it (C5): expiry first, so that a job past its close
    date is archived, never re-published."""
    expired = expire(session, today=today)
    return Refreshed(expired, refresh(session, today=today))
