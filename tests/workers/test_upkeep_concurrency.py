"""C5, C8, C9: two beat processes firing at once give the result of one run, on PostgreSQL.

A committed database of its own (not the rolled-back transaction of the other tests): each
run commits, and the runs race on separate connections. 2,000 jobs of every kind are seeded;
the final table is compared with the state computed in Python for one run, and the counts the
two runs return must add up to that single run's count (no row is changed twice).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from models.applications import outbox
from models.applications.service import purge
from models.core.dates import REFRESH_DAYS, utcnow
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Application, Employer, Job, OutboxEntry, Resume
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import upkeep
from tests.services import scratch_postgres
from workers.delivery import timing
from workers.tasks import run_expire, run_purge

pytestmark = pytest.mark.postgres

TODAY = date(2026, 3, 10)
DAY = timedelta(days=1)
JOBS = 2000
SETTINGS = Settings.from_env(
    {"JOBPOST_TIMEZONE": "America/Toronto", "APPLICATION_RETENTION_DAYS": "180"}
)
State = dict[int, tuple[str, date, date]]  # id → status, publishDate, closeDate


@pytest.fixture(scope="module")
def pg() -> Iterator[Engine]:
    with scratch_postgres() as url:
        engine = make_engine(url, pool_size=8)
        upgrade(engine)
        yield engine
        engine.dispose()


@pytest.fixture
def factory(pg: Engine) -> Iterator[sessionmaker[Session]]:
    """Sessions on the committed database, emptied of jobs, employers and applications."""
    made = make_sessionmaker(pg)
    yield made
    with session_scope(made) as s:
        s.execute(delete(Application))
        s.execute(delete(Job))
        s.execute(delete(Employer))


def seed_jobs(factory: sessionmaker[Session], seed: int) -> State:
    """2,000 jobs: both plans, every status, close dates and publish dates around today."""
    rng = random.Random(seed)
    with session_scope(factory) as s:
        plans = {
            plan: s.scalar(
                insert(Employer)
                .values(name=f"{plan} employer", plan=plan, created_at=utcnow())
                .returning(Employer.id)
            )
            for plan in ("unlimited", "standard")
        }
        rows = [
            {
                "employer_id": plans[rng.choice(["unlimited", "unlimited", "standard"])],
                "title": f"Job {i}",
                "search_text": f"job {i}",
                "publish_date": TODAY - rng.randint(0, 20) * DAY,
                "close_date": TODAY + rng.randint(-10, 10) * DAY,
                "status": rng.choice(["active", "active", "active", "draft", "archived"]),
                "auto_refresh": rng.random() < 0.6,
                "confidential": False,
                "salary_commission": False,
                "position_type_id": 1,
                "description": "<p>Work.</p>",
                "routing_type": 1,
                "application_email": "jobs@race.test",
                "updated_at": datetime(2026, 1, 1, tzinfo=UTC),
            }
            for i in range(JOBS)
        ]
        s.execute(insert(Job), rows)
    return table(factory)


def table(factory: sessionmaker[Session]) -> State:
    with factory() as s:
        rows = s.execute(select(Job.id, Job.status, Job.publish_date, Job.close_date))
        return {r.id: (r.status, r.publish_date, r.close_date) for r in rows}


def one_run(factory: sessionmaker[Session], before: State, today: date) -> tuple[State, int, int]:
    """What a single expire-then-refresh run must leave, and its two counts (C5)."""
    with factory() as s:
        flagged = set(s.scalars(select(Job.id).where(Job.auto_refresh.is_(True))))
        unlimited = set(
            s.scalars(select(Job.id).join(Employer).where(Employer.plan == "unlimited"))
        )
    after, expired, refreshed = dict(before), 0, 0
    for job, (status, publish, close) in before.items():
        if status == "active" and close < today:
            after[job], expired = ("archived", publish, close), expired + 1
    for job, (status, publish, close) in after.items():
        due = publish <= today - timedelta(days=REFRESH_DAYS)
        if status == "active" and job in flagged and job in unlimited and due:
            after[job], refreshed = (status, today, close), refreshed + 1
    return after, expired, refreshed


def in_threads(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, each in a thread of its own, released by one barrier."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(i: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = call()
        except BaseException as e:  # reported in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a run did not finish"
    return results


def beat_refresh_task(factory: sessionmaker[Session]) -> tuple[int, int]:
    """What jobpost.refresh does (expiry first, C5: workers.tasks.run_refresh), with the
    service date fixed: (archived, refreshed)."""
    done = upkeep.expire_and_refresh(factory, today=TODAY)
    return done.expired, done.refreshed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_simultaneous_runs_leave_what_one_run_leaves(
    factory: sessionmaker[Session], seed: int
) -> None:
    before = seed_jobs(factory, seed)
    expected, expired, refreshed = one_run(factory, before, TODAY)
    assert expired > 100 and refreshed > 100  # the seed gives both tasks real work

    first, second = in_threads(
        lambda: beat_refresh_task(factory), lambda: beat_refresh_task(factory)
    )

    assert table(factory) == expected
    assert first[0] + second[0] == expired  # no job archived twice
    assert first[1] + second[1] == refreshed  # no job refreshed twice
    assert beat_refresh_task(factory) == (0, 0)
    assert table(factory) == expected


def test_four_runs_at_once_still_change_each_row_once(factory: sessionmaker[Session]) -> None:
    before = seed_jobs(factory, 4)
    expected, expired, refreshed = one_run(factory, before, TODAY)
    results = in_threads(*[lambda: beat_refresh_task(factory)] * 4)
    assert table(factory) == expected
    assert sum(r[0] for r in results) == expired
    assert sum(r[1] for r in results) == refreshed


def overlapped(
    factory: sessionmaker[Session], statement: Callable[[Session], int], hold: float = 1.0
) -> tuple[int, int, float]:
    """The worst interleaving, forced: run A changes its rows and holds its transaction open
    for `hold` seconds; run B starts meanwhile and must wait on A's row locks, then skip the
    rows A changed. Returns A's count, B's count, and how long B waited."""
    a_changed = threading.Event()
    a_count: list[int] = []

    def run_a() -> None:
        with session_scope(factory) as s:
            a_count.append(statement(s))
            a_changed.set()
            time.sleep(hold)

    a = threading.Thread(target=run_a)
    a.start()
    assert a_changed.wait(30), "run A did not get going"
    started = time.monotonic()
    with session_scope(factory) as s:
        b_count = statement(s)
    waited = time.monotonic() - started
    a.join(30)
    return a_count[0], b_count, waited


def test_expire_overlapping_a_run_in_progress_changes_nothing_more(
    factory: sessionmaker[Session],
) -> None:
    before = seed_jobs(factory, 5)
    expected, expired, _ = one_run(factory, before, TODAY)
    a, b, waited = overlapped(factory, lambda s: upkeep.expire(s, today=TODAY))
    assert (a, b) == (expired, 0)
    assert waited >= 0.5, "run B never waited for run A: the runs did not overlap"
    assert {j: v for j, v in table(factory).items() if v[0] == "archived"} == {
        j: v for j, v in expected.items() if v[0] == "archived"
    }


def test_refresh_overlapping_a_run_in_progress_changes_nothing_more(
    factory: sessionmaker[Session],
) -> None:
    before = seed_jobs(factory, 6)
    expected, _, refreshed = one_run(factory, before, TODAY)
    assert run_expire(factory, SETTINGS, TODAY) > 0
    a, b, waited = overlapped(factory, lambda s: upkeep.refresh(s, today=TODAY))
    assert (a, b) == (refreshed, 0)
    assert waited >= 0.5, "run B never waited for run A: the runs did not overlap"
    assert table(factory) == expected


def seed_applications(factory: sessionmaker[Session], n: int, *, age: timedelta) -> None:
    """n applications `age` old, delivery over for two thirds of them, each with a résumé."""
    received = utcnow() - age
    with session_scope(factory) as s:
        employer = s.scalar(
            insert(Employer)
            .values(name="Retention Ltd", plan="standard", created_at=utcnow())
            .returning(Employer.id)
        )
        ids = s.scalars(
            insert(Application).returning(Application.id),
            [
                {
                    "employer_id": employer,
                    "name": "Ada",
                    "email": "ada@example.org",
                    "received_at": received,
                    "job_title": "Baker",
                    "application_email": "j@x.test",
                    "employer_name": "Retention Ltd",
                }
                for _ in range(n)
            ],
        ).all()
        s.execute(
            insert(OutboxEntry),
            [
                {
                    "application_id": a,
                    "status": ("sent", "failed", "pending")[i % 3],
                    "attempts": 1,
                    "next_attempt_at": received,
                }
                for i, a in enumerate(ids)
            ],
        )
        s.execute(insert(Resume), [{"application_id": a, "data": b"%PDF-1.4\n"} for a in ids])


def counts(factory: sessionmaker[Session]) -> tuple[int, int, int]:
    with factory() as s:
        return tuple(  # type: ignore[return-value]
            int(s.scalar(select(func.count()).select_from(t)) or 0)
            for t in (Application, OutboxEntry, Resume)
        )


def test_two_simultaneous_purges_delete_each_application_once(
    factory: sessionmaker[Session],
) -> None:
    seed_applications(factory, 300, age=timedelta(days=200))
    first, second = in_threads(
        lambda: run_purge(factory, SETTINGS), lambda: run_purge(factory, SETTINGS)
    )
    assert first + second == 200
    assert counts(factory) == (100, 100, 100)


def purge_now(session: Session) -> int:
    return purge(session, now=utcnow(), retention_days=SETTINGS.application_retention_days)


def test_purge_overlapping_a_run_in_progress_deletes_nothing_more(
    factory: sessionmaker[Session],
) -> None:
    seed_applications(factory, 300, age=timedelta(days=200))
    a, b, waited = overlapped(factory, purge_now)
    assert (a, b) == (200, 0)
    assert waited >= 0.5
    assert counts(factory) == (100, 100, 100)


def test_sweep_overlapping_a_run_in_progress_enqueues_nothing_more(
    factory: sessionmaker[Session],
) -> None:
    seed_applications(factory, 30, age=timedelta(minutes=10))
    now = utcnow()
    a, b, _ = overlapped(factory, lambda s: len(outbox.sweep(s, now=now, timing=timing(SETTINGS))))
    assert (a, b) == (10, 0)


def test_sweep_overlapping_a_run_in_progress_enqueues_a_lease_run_out_once(
    factory: sessionmaker[Session],
) -> None:
    """Entries left `sending` by a dead worker go back without the grace (C8), and a sweep
    waiting on another's row locks then finds them enqueued since their lease ran out."""
    seed_applications(factory, 30, age=timedelta(minutes=10))
    now = utcnow()
    with session_scope(factory) as s:
        s.execute(
            update(OutboxEntry)
            .where(OutboxEntry.status == "pending")
            .values(
                status="sending",
                enqueued_at=now - timedelta(minutes=6),
                lease_until=now - timedelta(minutes=1),
            )
        )
    long_grace = outbox.Timing(lease_seconds=300, sweep_grace_seconds=600)
    a, b, waited = overlapped(factory, lambda s: len(outbox.sweep(s, now=now, timing=long_grace)))
    assert (a, b) == (10, 0)
    assert waited >= 0.5


def test_a_copy_sent_back_while_the_purge_runs_is_not_purged(
    factory: sessionmaker[Session],
) -> None:
    """C8: never a copy still pending. An operator's retry (failed → pending) holds its
    entry when the purge starts and commits meanwhile: the purge must see it pending."""
    seed_applications(factory, 3, age=timedelta(days=200))  # sent, failed, pending
    retried = threading.Event()

    def operator_retry() -> None:
        with session_scope(factory) as s:
            assert len(outbox.retry_failed(s, None, now=utcnow())) == 1
            retried.set()
            time.sleep(1.0)

    operator = threading.Thread(target=operator_retry)
    operator.start()
    assert retried.wait(30), "the retry did not get going"
    with session_scope(factory) as s:
        purged = purge_now(s)
    operator.join(30)
    assert purged == 1  # the sent copy only
    assert counts(factory) == (2, 2, 2)
    with factory() as s:
        assert sorted(s.scalars(select(OutboxEntry.status))) == ["pending", "pending"]
