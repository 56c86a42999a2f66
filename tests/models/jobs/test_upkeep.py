"""C5 expiry and auto-refresh, C8 retention and the sweeper, as the periodic tasks of C9 run them.

In-process on both backends (the `sessions` fixture: each test's writes are rolled back). Each
task is called the way its Celery task calls it (`workers.tasks.run_*`), and the count it returns
is checked against the rows that really changed. `jobpost tasks run … --today` is exercised on a
committed SQLite database of the module's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest
from kombu.connection import Connection
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

import models.core.dates
import workers.tasks
from models import employers
from models.applications import outbox, resumes
from models.applications import service as applications
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Application, Employer, Job, OutboxEntry, Resume
from models.db.unit_of_work import make_sessionmaker
from models.jobs import upkeep
from tests.conftest import copy_database
from tests.factories import JOBS, create_job
from workers import broker
from workers.app import make_celery
from workers.cli import main
from workers.tasks import run_expire, run_purge, run_refresh, run_sweep

TODAY = date(2026, 3, 10)
DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)
CLAIM = outbox.Claim()
TORONTO = ZoneInfo("America/Toronto")
# 23:30 on 10 March in Toronto (EDT, UTC-4 since 8 March): still the 10th there.
JUST_AFTER_MIDNIGHT_UTC = datetime(2026, 3, 11, 3, 30, tzinfo=UTC)
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

Row = tuple[str, date, date, bool]  # status, publishDate, closeDate, autoRefresh


# --- helpers -----------------------------------------------------------------------------------


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


# --- expiry (C5) -------------------------------------------------------------------------------


def test_expire_archives_active_jobs_closed_before_today_and_nothing_else(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    """A job is active through its closeDate; drafts and archived jobs are never touched."""
    owner = employer_id(sessions, "standard")
    closes_today = add_job(sessions, owner, close=TODAY)
    closed_yesterday = add_job(sessions, owner, close=TODAY - DAY)
    closed_long_ago = add_job(sessions, owner, close=TODAY - 90 * DAY)
    closes_tomorrow = add_job(sessions, owner, close=TODAY + DAY)
    draft = add_job(sessions, owner, status="draft", close=TODAY - DAY)
    archived = add_job(sessions, owner, status="archived", close=TODAY - DAY)
    before = jobs_now(sessions)

    assert run_expire(sessions, toronto, TODAY) == 2

    after = jobs_now(sessions)
    assert after[closes_today][0] == "active"
    assert after[closes_tomorrow][0] == "active"
    assert after[closed_yesterday][0] == "archived"
    assert after[closed_long_ago][0] == "archived"
    assert after[draft] == before[draft] and after[archived] == before[archived]
    # Expiry changes the status only: both dates stay as they were.
    for job in (closed_yesterday, closed_long_ago):
        assert after[job][1:] == before[job][1:]


def test_a_job_closing_today_is_archived_the_day_after(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    job = add_job(sessions, employer_id(sessions, "standard"), close=TODAY)
    assert run_expire(sessions, toronto, TODAY) == 0
    assert jobs_now(sessions)[job][0] == "active"
    assert run_expire(sessions, toronto, TODAY + DAY) == 1
    assert jobs_now(sessions)[job][0] == "archived"


@pytest.mark.parametrize(
    ("instant", "service_date"),
    [
        (JUST_AFTER_MIDNIGHT_UTC, date(2026, 3, 10)),
        (datetime(2026, 3, 11, 3, 59, 59, tzinfo=UTC), date(2026, 3, 10)),  # EDT, UTC-4
        (datetime(2026, 3, 11, 4, 0, tzinfo=UTC), date(2026, 3, 11)),
        (datetime(2026, 1, 11, 4, 59, 59, tzinfo=UTC), date(2026, 1, 10)),  # EST, UTC-5
        (datetime(2026, 1, 11, 5, 0, tzinfo=UTC), date(2026, 1, 11)),
    ],
)
def test_the_service_date_is_the_calendar_date_in_toronto(
    instant: datetime, service_date: date
) -> None:
    assert models.core.dates.today_in(TORONTO, now=instant) == service_date


@pytest.mark.parametrize(
    ("day", "instant"),
    [
        (date(2026, 3, 10), JUST_AFTER_MIDNIGHT_UTC),  # the service date itself: unchanged
        (date(2026, 7, 1), datetime(2026, 7, 2, 3, 30, tzinfo=UTC)),  # EDT: 23:30 on 1 July
        (date(2026, 1, 5), datetime(2026, 1, 6, 4, 30, tzinfo=UTC)),  # EST: 23:30 on 5 January
    ],
)
def test_on_day_keeps_the_time_of_day_in_toronto(day: date, instant: datetime) -> None:
    """`--today` for purge (C9): 23:30 in Toronto on 10 March, moved to `day`, is 23:30 there."""
    moved = models.core.dates.on_day(TORONTO, day, JUST_AFTER_MIDNIGHT_UTC)
    assert moved == instant
    assert models.core.dates.today_in(TORONTO, now=moved) == day


def test_just_after_midnight_utc_a_job_closing_the_toronto_day_stays_active(
    sessions: sessionmaker[Session], settings: Settings, at_instant: Callable[[datetime], None]
) -> None:
    """03:30 UTC on 11 March is 23:30 on 10 March in Toronto: a job closing on the 10th is
    still open there. The task computes the date itself (no `today` passed), as beat runs it."""
    owner = employer_id(sessions, "standard")
    job = add_job(sessions, owner, close=date(2026, 3, 10))
    at_instant(JUST_AFTER_MIDNIGHT_UTC)
    assert models.core.dates.today_in(TORONTO, now=JUST_AFTER_MIDNIGHT_UTC) == date(2026, 3, 10)
    with sessions() as s:
        assert upkeep.expire(s, today=models.core.dates.today_in(TORONTO)) == 0

    assert run_expire(sessions, with_zone(settings, "America/Toronto")) == 0
    assert jobs_now(sessions)[job][0] == "active"

    # The same instant in a zone where the 11th has begun: the job is past its close date.
    assert run_expire(sessions, with_zone(settings, "UTC")) == 1
    assert jobs_now(sessions)[job][0] == "archived"


def test_expire_archives_once_midnight_comes_in_toronto(
    sessions: sessionmaker[Session], toronto: Settings, at_instant: Callable[[datetime], None]
) -> None:
    job = add_job(sessions, employer_id(sessions, "standard"), close=date(2026, 3, 10))
    at_instant(datetime(2026, 3, 11, 3, 59, 59, tzinfo=UTC))
    assert run_expire(sessions, toronto) == 0
    at_instant(datetime(2026, 3, 11, 4, 0, tzinfo=UTC))
    assert run_expire(sessions, toronto) == 1
    assert jobs_now(sessions)[job][0] == "archived"


# --- auto-refresh (C5) -------------------------------------------------------------------------


def test_refresh_moves_publish_date_only_for_the_right_plan_status_flag_and_age(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    unlimited = employer_id(sessions, "unlimited", "Unlimited Ltd")
    standard = employer_id(sessions, "standard", "Standard Ltd")
    close = TODAY + 20 * DAY
    seven_days = add_job(
        sessions, unlimited, publish=TODAY - 7 * DAY, close=close, auto_refresh=True
    )
    thirty_days = add_job(
        sessions, unlimited, publish=TODAY - 30 * DAY, close=close, auto_refresh=True
    )
    six_days = add_job(sessions, unlimited, publish=TODAY - 6 * DAY, close=close, auto_refresh=True)
    no_flag = add_job(sessions, unlimited, publish=TODAY - 7 * DAY, close=close)
    draft = add_job(sessions, unlimited, status="draft", publish=TODAY - 7 * DAY, auto_refresh=True)
    archived = add_job(
        sessions, unlimited, status="archived", publish=TODAY - 7 * DAY, auto_refresh=True
    )
    # Stored true (written before a downgrade, say), but the plan no longer allows it.
    standard_plan = add_job(sessions, standard, publish=TODAY - 7 * DAY, auto_refresh=True)
    before = jobs_now(sessions)

    assert run_refresh(sessions, toronto, TODAY) == 2

    after = jobs_now(sessions)
    for job in (seven_days, thirty_days):
        assert after[job] == ("active", TODAY, close, True)  # closeDate never moves
    for job in (six_days, no_flag, draft, archived, standard_plan):
        assert after[job] == before[job]


def test_a_downgraded_employer_keeps_its_stored_auto_refresh_but_is_not_refreshed(
    api: Any, sessions: sessionmaker[Session], make_employer: Any, clock: Any, toronto: Settings
) -> None:
    """autoRefresh true can only be written on the unlimited plan (C4); after a downgrade to
    standard the stored flag stays true, and refresh must still leave the job alone."""
    downgraded = make_employer("Was Unlimited", "unlimited")
    still_unlimited = make_employer("Still Unlimited", "unlimited")
    kept = create_job(api, downgraded, status="active", autoRefresh=True)
    control = create_job(api, still_unlimited, status="active", autoRefresh=True)
    with sessions() as s:
        employers.set_plan(s, downgraded.id, "standard")
        s.commit()
    with sessions() as s:
        stored = s.get(Job, kept["id"])
        assert stored is not None and stored.auto_refresh is True
        assert s.get(Employer, downgraded.id).plan == "standard"  # type: ignore[union-attr]

    week_later = clock.today + 7 * DAY
    assert run_refresh(sessions, toronto, week_later) == 1

    after = jobs_now(sessions)
    assert after[kept["id"]][1] == date.fromisoformat(kept["publishDate"])
    assert after[control["id"]][1] == week_later
    assert after[control["id"]][2] == date.fromisoformat(control["closeDate"])


def test_the_refresh_task_expires_first(
    sessions: sessionmaker[Session],
    toronto: Settings,
    at_instant: Callable[[datetime], None],
) -> None:
    """C5: expiry runs before refresh, so a job past its closeDate is archived, not refreshed.
    The Celery task body itself runs here, on the test's sessions and settings."""
    refresh = make_celery(toronto, sessions=sessions).tasks["jobpost.refresh"]
    at_instant(JUST_AFTER_MIDNIGHT_UTC)  # 10 March in Toronto
    unlimited = employer_id(sessions, "unlimited")
    past_close = add_job(
        sessions, unlimited, publish=TODAY - 20 * DAY, close=TODAY - DAY, auto_refresh=True
    )
    due = add_job(sessions, unlimited, publish=TODAY - 20 * DAY, close=TODAY, auto_refresh=True)

    assert refresh() == 1

    after = jobs_now(sessions)
    assert after[past_close] == ("archived", TODAY - 20 * DAY, TODAY - DAY, True)
    assert after[due] == ("active", TODAY, TODAY, True)


# --- retention (C8) ----------------------------------------------------------------------------


def test_purge_deletes_only_old_finished_applications_with_their_resumes_and_outbox(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    retention = dataclasses.replace(settings, application_retention_days=180)
    job = add_job(sessions, employer_id(sessions, "standard"))
    old, young = timedelta(days=181), timedelta(days=179)
    gone = [
        add_application(sessions, job, age=old, delivery="sent"),
        add_application(sessions, job, age=old, delivery="failed"),
        add_application(sessions, job, age=old, delivery="sent", resume=False),
    ]
    kept = [
        add_application(sessions, job, age=old, delivery="pending"),
        add_application(sessions, job, age=old, delivery="sending"),
        add_application(sessions, job, age=young, delivery="sent"),
        add_application(sessions, job, age=young, delivery="failed"),
    ]
    assert table_counts(sessions) == {"applications": 7, "resumes": 6, "outbox": 7}

    assert run_purge(sessions, retention) == 3

    assert table_counts(sessions) == {"applications": 4, "resumes": 4, "outbox": 4}
    with sessions() as s:
        assert sorted(s.scalars(select(Application.id))) == sorted(kept)
        assert sorted(s.scalars(select(Resume.application_id))) == sorted(kept)
        assert sorted(s.scalars(select(OutboxEntry.application_id))) == sorted(kept)
        assert not set(gone) & set(s.scalars(select(Application.id)))


def test_purge_today_counts_the_retention_back_from_that_service_date(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    """`jobpost tasks run purge --today` (C9) purges as the task would at this time of day on
    that date: nothing more for a date in the past, what will be old by then for a later one."""
    retention = dataclasses.replace(toronto, application_retention_days=180)
    job = add_job(sessions, employer_id(sessions, "standard"))
    old = add_application(sessions, job, age=timedelta(days=200), delivery="sent")
    month_old = [
        add_application(sessions, job, age=timedelta(days=30), delivery="sent"),
        add_application(sessions, job, age=timedelta(days=30), delivery="failed"),
    ]
    ten_days_old = add_application(sessions, job, age=timedelta(days=10), delivery="sent")
    pending = add_application(sessions, job, age=timedelta(days=30), delivery="pending")
    today = models.core.dates.today_in(TORONTO)

    def left() -> list[int]:
        with sessions() as s:
            return sorted(s.scalars(select(Application.id)))

    assert run_purge(sessions, retention, today - 365 * DAY) == 0  # a year ago: 200 is -165
    assert left() == sorted([old, *month_old, ten_days_old, pending])
    assert run_purge(sessions, retention, today) == 1
    assert left() == sorted([*month_old, ten_days_old, pending])
    assert run_purge(sessions, retention, today + 160 * DAY) == 2  # 190 days old by then
    assert left() == [ten_days_old, pending]  # 170 days old then; pending is never purged
    assert run_purge(sessions, retention, today + 175 * DAY) == 1
    assert left() == [pending]


# --- the sweeper (C8) --------------------------------------------------------------------------


def test_sweep_enqueues_due_entries_once_within_the_grace(
    sessions: sessionmaker[Session], settings: Settings, enqueued: list[int]
) -> None:
    job = add_job(sessions, employer_id(sessions, "standard"))
    due = add_application(sessions, job, age=timedelta(minutes=10), delivery="pending")
    add_application(sessions, job, age=timedelta(minutes=10), delivery="sent")
    with sessions() as s:  # as if the after-commit enqueue had failed long ago
        entry = s.get(OutboxEntry, due)
        assert entry is not None
        entry.enqueued_at = None
        s.commit()

    assert run_sweep(sessions, settings) == 1
    assert enqueued == [due]
    assert run_sweep(sessions, settings) == 0
    assert enqueued == [due]


def test_sweep_deletes_the_messages_workers_took_from_the_embedded_broker(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """kombu's SQLAlchemy transport only marks a message it hands a worker as invisible; kept,
    they filled the broker's SQLite file and every poll scanned past them. The sweep deletes
    them; a message still waiting stays."""
    url = settings.broker_url
    assert url.startswith("sqla+sqlite:")
    publisher = make_celery(settings, publisher=True)
    for application_id in (1, 2, 3):
        assert workers.enqueue.deliver(publisher, application_id)
    with Connection(url) as conn:  # type: ignore[no-untyped-call]  # a worker takes two
        for _ in range(2):
            taken = conn.default_channel.basic_get("email")
            assert taken is not None
            taken.ack()

    def stored() -> int:
        database = url.removeprefix("sqla+sqlite:///")
        with contextlib.closing(sqlite3.connect(database)) as db:
            return int(db.execute("SELECT count(*) FROM kombu_message").fetchone()[0])

    assert stored() == 3
    assert run_sweep(sessions, settings) == 0
    assert stored() == 1
    assert broker.depths(url) == {"email": 1, "maintenance": 0, "syncs": 0, "webhooks": 0}


def set_entry(sessions: sessionmaker[Session], application_id: int, **values: Any) -> None:
    with sessions() as s:
        entry = s.get(OutboxEntry, application_id)
        assert entry is not None
        for name, value in values.items():
            setattr(entry, name, value)
        s.commit()


def test_sweep_enqueues_an_entry_whose_lease_ran_out_without_waiting_for_the_grace(
    sessions: sessionmaker[Session], settings: Settings, enqueued: list[int]
) -> None:
    """C8: the grace is for pending entries; one left `sending` by a dead worker goes back as
    soon as its lease runs out, even when the grace is longer than the lease."""
    long_grace = dataclasses.replace(
        settings, outbox_lease_seconds=300, outbox_sweep_grace_seconds=600
    )
    job = add_job(sessions, employer_id(sessions, "standard"))
    dead = add_application(sessions, job, age=timedelta(minutes=10), delivery="sending")
    live = add_application(sessions, job, age=timedelta(minutes=10), delivery="sending")
    now = models.core.dates.utcnow()
    # Enqueued 400 s ago and claimed at once; one worker died, the other is still sending.
    set_entry(sessions, dead, enqueued_at=now - timedelta(seconds=400), lease_until=now - SECOND)
    set_entry(sessions, live, enqueued_at=now - timedelta(seconds=400), lease_until=now + SECOND)

    assert run_sweep(sessions, long_grace) == 1
    assert enqueued == [dead]


def test_a_lease_run_out_is_enqueued_once_per_lease_and_never_after_the_copy_is_sent(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Enqueued as its lease runs out, the entry is left alone by the next sweeps while that
    message waits for a worker (a re-delivered message may be on its way too: the first claim
    wins, the other finds the lease live and skips); the grace replaces a message lost. A new
    claim whose lease runs out goes back at once; a copy sent is never enqueued again (C8)."""
    timing = outbox.Timing(lease_seconds=300, sweep_grace_seconds=600)
    job = add_job(sessions, employer_id(sessions, "standard"))
    app_id = add_application(sessions, job, age=timedelta(minutes=10), delivery="sending")
    t0 = models.core.dates.utcnow()
    set_entry(sessions, app_id, enqueued_at=t0 - timedelta(seconds=400), lease_until=t0 - SECOND)

    def sweep(after: float) -> list[int]:
        with sessions() as s:
            ids = outbox.sweep(s, now=t0 + timedelta(seconds=after), timing=timing)
            s.commit()
            return ids

    def claim(after: float) -> Any:
        with sessions() as s:
            won = CLAIM(s, app_id, now=t0 + timedelta(seconds=after), timing=timing)
            s.commit()
            return won

    assert sweep(0) == [app_id]  # the lease ran out: at once
    assert sweep(60) == sweep(599) == []  # enqueued since: not on every sweep
    assert sweep(601) == [app_id]  # the grace is over: that message may be lost
    assert claim(610) is not None
    assert claim(611) is None  # the other message: the lease is live
    assert sweep(900) == []
    assert sweep(911) == [app_id]  # that worker died too: its lease ran out, at once
    won = claim(920)
    with sessions() as s:
        assert outbox.mark_sent(s, app_id, now=t0 + timedelta(seconds=921), lease=won.lease_until)
        s.commit()
    assert claim(5000) is None
    assert sweep(5000) == []
    with sessions() as s:
        entry = s.get(OutboxEntry, app_id)
        assert entry is not None and (entry.status, entry.attempts) == ("sent", 2)


def test_a_pending_copy_is_due_at_its_next_attempt_time_not_before(
    sessions: sessionmaker[Session],
) -> None:
    """C8: entries that are pending and due, "their next attempt time has come", are swept
    and claimed: at that instant, not a microsecond before."""
    timing = outbox.Timing()
    job = add_job(sessions, employer_id(sessions, "standard"))
    app_id = add_application(sessions, job, age=timedelta(minutes=10), delivery="pending")
    due = models.core.dates.utcnow().replace(microsecond=0) + timedelta(minutes=1)
    set_entry(sessions, app_id, next_attempt_at=due, enqueued_at=None)
    before = due - timedelta(microseconds=1)
    with sessions() as s:
        assert outbox.sweep(s, now=before, timing=timing) == []
        assert CLAIM(s, app_id, now=before, timing=timing) is None
        assert outbox.sweep(s, now=due, timing=timing) == [app_id]
        won = CLAIM(s, app_id, now=due, timing=timing)
        assert won is not None and won.attempts == 1


def test_an_operator_retry_of_one_copy_leaves_the_other_failed_copies_alone(
    sessions: sessionmaker[Session],
) -> None:
    """C9 `jobpost outbox retry APPLICATION_ID`: that failed entry back to pending, no other;
    `--all-failed` takes every failed one, and neither a pending nor a sent one."""
    job = add_job(sessions, employer_id(sessions, "standard"))
    one, other, third = (
        add_application(sessions, job, age=timedelta(hours=30), delivery="failed") for _ in range(3)
    )
    pending = add_application(sessions, job, age=timedelta(hours=1), delivery="pending")
    sent = add_application(sessions, job, age=timedelta(hours=1), delivery="sent")

    def statuses() -> dict[int, str]:
        with sessions() as s:
            return dict(s.execute(select(OutboxEntry.application_id, OutboxEntry.status)).all())

    with sessions() as s:
        assert outbox.retry_failed(s, one, now=models.core.dates.utcnow()) == [one]
        assert outbox.retry_failed(s, pending, now=models.core.dates.utcnow()) == []
        s.commit()
    assert statuses() == {
        one: "pending",
        other: "failed",
        third: "failed",
        pending: "pending",
        sent: "sent",
    }
    with sessions() as s:
        assert outbox.retry_failed(s, None, now=models.core.dates.utcnow()) == [other, third]
        s.commit()
    assert set(statuses().values()) == {"pending", "sent"}


class Jitter(random.Random):
    """A random source that always draws `value`: the ends of the jitter."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize("draw", [0.0, 0.999999])
def test_the_retry_delay_doubles_each_attempt_within_its_jitter_up_to_six_hours(
    draw: float,
) -> None:
    """C9 DELIVERY_RETRY_BASE_SECONDS: the first retry waits the base, and the delay doubles
    each attempt, with jitter over its upper half (base * 2^(n-1) * [0.5, 1]); C8: it stops
    doubling at 6 hours, so a long outage is still tried several times a day."""
    timing = outbox.Timing(retry_base_seconds=60)
    for attempts, full in [(1, 60), (2, 120), (3, 240), (4, 480), (9, 15360), (20, 6 * 3600)]:
        delay = outbox.backoff(attempts, timing, Jitter(draw))
        assert full * 0.5 <= delay <= full
        assert delay == pytest.approx(full * (0.5 + 0.5 * draw))


def test_a_worker_whose_lease_ran_out_cannot_undo_the_next_workers_outcome(
    sessions: sessionmaker[Session],
) -> None:
    """C8: a send outlived its lease (OUTBOX_LEASE_SECONDS set below the send, by mistake) and
    another worker claimed the copy and sent it. The first worker's late outcome, a transient
    failure here, changes nothing: pending again, the copy would go out a third time."""
    timing = outbox.Timing(lease_seconds=30)
    job = add_job(sessions, employer_id(sessions, "standard"))
    app_id = add_application(sessions, job, age=timedelta(minutes=10), delivery="pending")
    t0 = models.core.dates.utcnow()
    with sessions() as s:
        first = CLAIM(s, app_id, now=t0, timing=timing)
        second = CLAIM(s, app_id, now=t0 + timedelta(seconds=31), timing=timing)
        assert first is not None and second is not None and second.attempts == 2
        late = outbox.mark_retry(
            s,
            app_id,
            "451 try again later",
            now=t0 + timedelta(seconds=40),
            since=t0,
            attempts=first.attempts,
            lease=first.lease_until,
            timing=timing,
        )
        assert late == "pending"  # what the first worker reports; the entry is not its own
        assert not outbox.mark_failed(s, app_id, "550 no", lease=first.lease_until)
        assert outbox.mark_sent(s, app_id, now=t0 + timedelta(seconds=41), lease=second.lease_until)
        s.commit()
    with sessions() as s:
        entry = s.get_one(OutboxEntry, app_id)
        assert (entry.status, entry.attempts, entry.last_error) == ("sent", 2, None)


# --- every task twice --------------------------------------------------------------------------


def seed_everything(sessions: sessionmaker[Session]) -> None:
    """Something for every task to do: expiry, refresh, purge and sweep."""
    unlimited = employer_id(sessions, "unlimited")
    for close in (TODAY - 2 * DAY, TODAY - DAY, TODAY, TODAY + DAY):
        for publish in (TODAY - 8 * DAY, TODAY - 7 * DAY, TODAY - 6 * DAY):
            add_job(sessions, unlimited, publish=publish, close=close, auto_refresh=True)
    job = add_job(sessions, unlimited)
    # 400 days old on TODAY, the service date the tasks are run for (purge counts from it).
    age = timedelta(days=400) + (models.core.dates.today_in(TORONTO) - TODAY)
    for delivery in ("sent", "failed", "pending"):
        add_application(sessions, job, age=age, delivery=delivery)
    with sessions() as s:
        for entry in s.scalars(select(OutboxEntry).where(OutboxEntry.status == "pending")):
            entry.enqueued_at = None
        s.commit()


def snapshot(sessions: sessionmaker[Session]) -> tuple[Any, ...]:
    with sessions() as s:
        return (
            jobs_now(sessions),
            table_counts(sessions),
            sorted(
                tuple(row)
                for row in s.execute(
                    select(OutboxEntry.application_id, OutboxEntry.status, OutboxEntry.enqueued_at)
                )
            ),
        )


@pytest.mark.parametrize(
    ("task", "first"), [("expire", 6), ("refresh", 4), ("purge", 2), ("sweep", 1)]
)
def test_each_task_run_twice_changes_nothing_the_second_time(
    sessions: sessionmaker[Session],
    toronto: Settings,
    enqueued: list[int],
    task: str,
    first: int,
) -> None:
    """Idempotent (C5, C8): the second run reports 0 and leaves every row as the first left it.
    Refresh expires first (6 jobs), then 4 of the jobs still open are due."""
    seed_everything(sessions)
    runner = workers.tasks.RUNNERS[task]
    assert runner(sessions, toronto, TODAY) == first
    once = snapshot(sessions)
    assert runner(sessions, toronto, TODAY) == 0
    assert snapshot(sessions) == once


def test_each_task_logs_what_it_changed(
    sessions: sessionmaker[Session],
    toronto: Settings,
    enqueued: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    seed_everything(sessions)
    caplog.set_level(logging.INFO, logger="jobpost.tasks")
    counts = {
        task: workers.tasks.RUNNERS[task](sessions, toronto, TODAY)
        for task in ("expire", "refresh", "purge", "sweep")
    }
    logged = [
        (r.periodic_task, r.changed)
        for r in caplog.records
        if hasattr(r, "periodic_task") and hasattr(r, "changed")
    ]
    assert counts == {"expire": 6, "refresh": 4, "purge": 2, "sweep": 1}
    # The refresh expires first, and logs that too: nothing is left to expire by then.
    assert logged == [
        ("expire", 6),
        ("expire", 0),
        ("refresh", 4),
        ("expiring", 0),  # no webhook endpoint listens (C12)
        ("purge", 2),
        ("sweep", 1),
    ]
    assert "expire: 6 active jobs closed before 2026-03-10 archived" in caplog.messages


# --- re-publishing (C5) and the tasks ----------------------------------------------------------


def test_an_expired_job_republished_gets_a_new_publish_date_and_a_valid_close_date(
    api: Any, sessions: sessionmaker[Session], employer: Any, clock: Any, toronto: Settings
) -> None:
    """archived (by expiry) → active by PUT: publishDate is today, the past closeDate becomes
    today + 60, and the next expiry leaves the job alone."""
    job = create_job(api, employer, status="active", closeDate="2026-03-20")
    clock.today = date(2026, 4, 2)
    assert run_expire(sessions, toronto, clock.today) == 1
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json["status"] == "archived"

    result = api.put(f"{JOBS}/{job['id']}", json={"status": "active"}, key=employer.key)

    assert result.status_code == 200, result.text
    assert result.json["status"] == "active"
    assert result.json["publishDate"] == "2026-04-02"
    assert result.json["closeDate"] == "2026-06-01"  # today + 60
    assert run_expire(sessions, toronto, clock.today) == 0
    assert jobs_now(sessions)[job["id"]] == ("active", date(2026, 4, 2), date(2026, 6, 1), False)


def test_a_republished_job_with_an_open_close_date_keeps_it(
    api: Any, sessions: sessionmaker[Session], employer: Any, clock: Any
) -> None:
    job = create_job(api, employer, status="active", closeDate="2026-04-30")
    assert (
        api.put(f"{JOBS}/{job['id']}", json={"status": "archived"}, key=employer.key).status_code
        == 200
    )
    clock.today = date(2026, 4, 2)
    result = api.put(f"{JOBS}/{job['id']}", json={"status": "active"}, key=employer.key)
    assert result.status_code == 200, result.text
    assert (result.json["publishDate"], result.json["closeDate"]) == ("2026-04-02", "2026-04-30")


# --- `jobpost tasks run … --today` (C9) --------------------------------------------------------


# The CLI tests run on a copy of the suite's migrated SQLite database (a file of their own,
# committed to by the command), so no test pays for a second migration.
ON_A_COPY = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


@pytest.fixture
def cli(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> Iterator[tuple[sessionmaker[Session], Callable[..., Any]]]:
    """The copy's sessions, and `run(*argv)` → (exit status, parsed --json output)."""
    url = copy_database(engine, tmp_path / "jobpost.db")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("JOBPOST_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("JOBPOST_TIMEZONE", "America/Toronto")
    copy_engine = make_engine(url)

    def run(*argv: str) -> tuple[int, Any]:
        capsys.readouterr()
        status = main(["tasks", "run", *argv, "--json"])
        printed = capsys.readouterr().out.strip()
        return status, orjson.loads(printed) if printed else None

    yield make_sessionmaker(copy_engine), run
    copy_engine.dispose()


@ON_A_COPY
def test_cli_tasks_run_expire_today_honours_the_boundary(cli: Any) -> None:
    factory, run = cli
    owner = employer_id(factory, "standard")
    closes_10th = add_job(factory, owner, close=date(2026, 3, 10))
    closes_9th = add_job(factory, owner, close=date(2026, 3, 9))

    assert run("expire", "--today", "2026-03-10") == (0, {"task": "expire", "changed": 1})
    states = jobs_now(factory)
    assert (states[closes_10th][0], states[closes_9th][0]) == ("active", "archived")

    assert run("expire", "--today", "2026-03-11") == (0, {"task": "expire", "changed": 1})
    assert jobs_now(factory)[closes_10th][0] == "archived"
    assert run("expire", "--today", "2026-03-11") == (0, {"task": "expire", "changed": 0})


@ON_A_COPY
def test_cli_tasks_run_refresh_expires_first_and_counts_the_refreshed(cli: Any) -> None:
    factory, run = cli
    unlimited = employer_id(factory, "unlimited")
    publish = date(2026, 3, 1)
    past_close = add_job(
        factory, unlimited, publish=publish, close=date(2026, 3, 9), auto_refresh=True
    )
    open_job = add_job(
        factory, unlimited, publish=publish, close=date(2026, 4, 30), auto_refresh=True
    )

    assert run("refresh", "--today", "2026-03-10") == (0, {"task": "refresh", "changed": 1})
    states = jobs_now(factory)
    assert states[past_close] == ("archived", publish, date(2026, 3, 9), True)
    assert states[open_job] == ("active", date(2026, 3, 10), date(2026, 4, 30), True)
    assert run("refresh", "--today", "2026-03-10") == (0, {"task": "refresh", "changed": 0})


@ON_A_COPY
@pytest.mark.parametrize("task", ["sweep", "purge"])
def test_cli_tasks_run_sweep_and_purge_print_their_counts(cli: Any, task: str) -> None:
    _factory, run = cli
    assert run(task, "--today", "2026-03-10") == (0, {"task": task, "changed": 0})


@ON_A_COPY
def test_cli_tasks_run_purge_today_sets_the_service_date(cli: Any) -> None:
    """C9: `--today` sets the service date; 150 days on, a month-old finished application is
    past the 180 days of retention."""
    factory, run = cli
    job = add_job(factory, employer_id(factory, "standard"))
    add_application(factory, job, age=timedelta(days=40), delivery="sent")
    today = models.core.dates.today_in(TORONTO)

    later = (today + 150 * DAY).isoformat()
    assert run("purge", "--today", today.isoformat()) == (0, {"task": "purge", "changed": 0})
    assert run("purge", "--today", later) == (0, {"task": "purge", "changed": 1})
    assert table_counts(factory) == {"applications": 0, "resumes": 0, "outbox": 0}


@ON_A_COPY
def test_cli_tasks_run_prints_the_count_for_people_too(cli: Any, capsys: Any) -> None:
    factory, _run = cli
    add_job(factory, employer_id(factory, "standard"), close=date(2026, 3, 9))
    assert main(["tasks", "run", "expire", "--today", "2026-03-10"]) == 0
    assert capsys.readouterr().out.strip() == "expire: 1 changed"


@ON_A_COPY
@pytest.mark.parametrize(
    "day",
    [
        "10/03/2026",
        "20260310",  # ISO 8601's basic format: date.fromisoformat takes it since Python 3.11
        "2026-W11-2",  # an ISO week date, taken as well
        "2026-03-32",
        "2026-3-10",
        "2026-03-10T00:00",
        " 2026-03-10",
        "２０２６-03-10",  # digits, but not ASCII ones
        "0001-01-01",  # a real date, but refresh's 7 days back would be none
        "9999-12-31",  # and purge's instant of that day, in Toronto, would be past any
    ],
)
def test_cli_tasks_run_refuses_a_malformed_date_as_a_usage_error(
    cli: Any, capsys: Any, day: str
) -> None:
    """C9: `--today YYYY-MM-DD`; anything else is exit status 2, and nothing runs."""
    factory, _run = cli
    job = add_job(factory, employer_id(factory, "standard"), close=date(2026, 3, 9))
    with pytest.raises(SystemExit) as exit_info:
        main(["tasks", "run", "expire", "--today", day])
    assert exit_info.value.code == 2
    assert "--today" in capsys.readouterr().err
    assert jobs_now(factory)[job][0] == "active"  # past its close date, but nothing ran
