"""What the tests of the periodic upkeep share (C5, C8): employers, jobs and applications written
straight to the tables at any age, what the tables hold afterwards, and the service clock in
Toronto stopped at an instant."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

import models.core.dates
from models import employers
from models.applications import outbox, resumes
from models.applications import service as applications
from models.core.settings import Settings
from models.db.entities import Application, Job, OutboxEntry, Resume

TODAY = date(2026, 3, 10)
DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)
CLAIM = outbox.Claim()
TORONTO = ZoneInfo("America/Toronto")
# 23:30 on 10 March in Toronto (EDT, UTC-4 since 8 March): still the 10th there.
JUST_AFTER_MIDNIGHT_UTC = datetime(2026, 3, 11, 3, 30, tzinfo=UTC)
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

Row = tuple[str, date, date, bool]  # status, publishDate, closeDate, autoRefresh


def employer_id(sessions: sessionmaker[Session], plan: str, name: str = "Upkeep Inc") -> int:
    with sessions() as s:
        employer = employers.create_employer(s, name, plan)
        s.commit()
        return employer.id


def add_job(
    sessions: sessionmaker[Session],
    owner: int,
    *,
    status: str = "active",
    publish: date = TODAY - 30 * DAY,
    close: date = TODAY + 30 * DAY,
    auto_refresh: bool = False,
    title: str = "Baker",
) -> int:
    """A job written straight to the table: any dates, any plan, no API rule in the way."""
    with sessions() as s:
        job = Job(
            employer_id=owner,
            title=title,
            search_text=title.casefold(),
            publish_date=publish,
            close_date=close,
            status=status,
            auto_refresh=auto_refresh,
            confidential=False,
            salary_commission=False,
            position_type_id=1,
            description="<p>Bake.</p>",
            routing_type=1,
            application_email="jobs@upkeep.test",
            updated_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        s.add(job)
        s.commit()
        return job.id


def jobs_now(sessions: sessionmaker[Session]) -> dict[int, Row]:
    with sessions() as s:
        rows = s.execute(
            select(Job.id, Job.status, Job.publish_date, Job.close_date, Job.auto_refresh)
        )
        return {r.id: (r.status, r.publish_date, r.close_date, r.auto_refresh) for r in rows}


def table_counts(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as s:
        return {
            name: int(s.scalar(select(func.count()).select_from(entity)) or 0)
            for name, entity in (
                ("applications", Application),
                ("resumes", Resume),
                ("outbox", OutboxEntry),
            )
        }


def add_application(
    sessions: sessionmaker[Session],
    job_id: int,
    *,
    age: timedelta,
    delivery: str,
    resume: bool = True,
) -> int:
    """An application `age` old whose outbox entry is in state `delivery`."""
    with sessions() as s:
        job = s.get(Job, job_id)
        assert job is not None
        cv = ("cv.pdf", resumes.PDF, PDF) if resume else None
        sub = applications.Submission("Ada", "ada@example.org", None, None, cv)
        application = applications.submit(s, job, sub)
        received = models.core.dates.utcnow() - age
        application.received_at = received
        assert application.outbox is not None  # not knocked out (C21)
        application.outbox.status = delivery
        application.outbox.next_attempt_at = received
        if delivery == "sending":
            application.outbox.lease_until = received + timedelta(minutes=5)
        s.commit()
        return application.id


def with_zone(settings: Settings, zone: str) -> Settings:
    return dataclasses.replace(settings, timezone=ZoneInfo(zone))


@pytest.fixture
def toronto(settings: Settings) -> Settings:
    return with_zone(settings, "America/Toronto")


@pytest.fixture
def at_instant(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime], None]:
    """Stop the service clock at an instant: `today_in` (and so every task) reads it."""

    def set_instant(instant: datetime) -> None:
        monkeypatch.setattr(models.core.dates, "utcnow", lambda: instant)

    return set_instant
