"""C8 retention and the sweeper, as the periodic tasks of C9 run them: old finished applications
purged with their résumés and outbox entries; due copies enqueued once, leases that ran out,
retry times and their jitter, an operator's retry.

In-process on both backends (the `sessions` fixture: each test's writes are rolled back). Each
task is called the way its Celery task calls it (`workers.tasks.run_*`), and the count it returns
is checked against the rows that really changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sqlite3
from datetime import timedelta
from typing import Any

import pytest
from kombu.connection import Connection
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import models.core.dates
import workers.tasks
from models.applications import outbox
from models.core.settings import Settings
from models.db.entities import Application, OutboxEntry, Resume
from tests.models.upkeep_rows import (
    CLAIM,
    DAY,
    SECOND,
    TORONTO,
    add_application,
    add_job,
    employer_id,
    table_counts,
)
from tests.models.upkeep_rows import toronto as toronto
from workers import broker
from workers.app import make_celery
from workers.tasks import run_purge, run_sweep

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
