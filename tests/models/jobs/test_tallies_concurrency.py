"""C6 under racing writers, on committed databases of the test's own (SQLite and PostgreSQL):
the API's writes, deletes, expiry and refresh run in threads, each on its connection, while
readers list; every list's total and page are those of the jobs as the reader's transaction
sees them, the totals of searches a process keeps included; the tallies end as the count."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.dates import utcnow
from models.core.errors import NotFound
from models.db.entities import Employer, Job
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import listing as job_listing
from models.jobs import search as job_search
from models.jobs import tallies, upkeep
from models.jobs import writes as jobs
from models.jobs.rules import STATUSES
from tests.conftest import migrated
from tests.factories import job_body
from tests.models.jobs.test_tallies import COMPACT_AFTER, counted, rows_of, tallied

TODAY = date(2026, 3, 10)
WORD = "zephyr"
TITLES = ["Zephyr driver", "Cook", "Baker", "Night zephyr", "Cashier", "Clerk"]
RACE_SECONDS = 3.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def committed(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[Engine]:
    """A migrated database whose transactions commit, for this module alone."""
    with migrated(request.param, tmp_path_factory.mktemp("race"), pool_size=10) as engine:
        yield engine


def seed(factory: sessionmaker[Session], name: str, count: int) -> int:
    """An unlimited-plan employer with `count` jobs of every status, a third holding WORD."""
    rng = random.Random(name)
    with session_scope(factory) as s:
        employer = employers.create_employer(s, name, "unlimited")
        s.flush()
        if not count:
            return employer.id
        s.execute(
            insert(Job),
            [
                {
                    "employer_id": employer.id,
                    "title": (title := rng.choice(TITLES)),
                    "search_text": job_search.search_text(title, None),
                    "publish_date": TODAY - timedelta(days=rng.randint(0, 20)),
                    "close_date": TODAY + timedelta(days=rng.randint(-3, 6)),
                    "status": rng.choice(STATUSES),
                    "auto_refresh": rng.random() < 0.5,
                    "position_type_id": 1,
                    "description": "<p>Work.</p>",
                    "routing_type": 1,
                    "application_email": "jobs@race.test",
                    "updated_at": utcnow(),
                }
                for _ in range(count)
            ],
        )
        return employer.id


def expected(
    connection: Connection, employer_id: int, q: str | None, status: str | None
) -> tuple[int, list[int]]:
    """The total and the ids in list order, by plain SQL in the caller's transaction."""
    where = [Job.employer_id == employer_id]
    if q:
        where.append(Job.search_text.like(f"%{job_search.fold_for_search(q)}%"))
    if status:
        where.append(Job.status == status)
    ids = connection.scalars(
        select(Job.id).where(*where).order_by(Job.publish_date.desc(), Job.id.desc())
    ).all()
    return len(ids), list(ids)


def race(calls: list[Callable[[threading.Event], None]], seconds: float) -> None:
    """Run each call in a thread of its own until `seconds` have passed; raise what failed."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(call: Callable[[threading.Event], None]) -> None:
        try:
            call(stop)
        except BaseException as e:  # reported in the test's thread
            failures.append(e)
            stop.set()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread did not stop"
    if failures:
        raise failures[0]


# What this race tests is the tallies, not the change feed's lag (C10): on a loaded machine a
# writer's transaction can outlast half the lag, which the lag's check would refuse.
RACE_LAG_SECONDS = 3600.0


def test_lists_stay_exact_under_writes_deletes_expiry_and_refresh(committed: Engine) -> None:  # noqa: C901 (one interleaved scenario)
    factory = make_sessionmaker(committed, RACE_LAG_SECONDS)
    ids = [seed(factory, f"Race {name} Corp", 120) for name in ("A", "B")]
    kept = tallies.SearchTotals()  # shared by the readers, as by a web process's requests
    served_kept: list[int] = []  # reads whose kept total was still that of their snapshot
    reads: list[int] = []

    def writer(n: int) -> Callable[[threading.Event], None]:
        def write(stop: threading.Event) -> None:
            rng = random.Random(n)
            while not stop.is_set():
                with session_scope(factory) as s:
                    employer = s.get_one(Employer, rng.choice(ids))
                    job_id = s.scalar(
                        select(Job.id)
                        .where(Job.employer_id == employer.id)
                        .order_by(func.random())
                        .limit(1)
                    )
                    roll = rng.random()
                    try:
                        if roll < 0.3 or job_id is None:
                            body = job_body(title=rng.choice(TITLES), status=rng.choice(STATUSES))
                            jobs.create(s, employer, body, today=TODAY)
                        elif roll < 0.85:
                            job = jobs.get(s, employer, job_id, for_update=True)
                            change = rng.choice(
                                [{"status": rng.choice(STATUSES)}, {"title": rng.choice(TITLES)}]
                            )
                            jobs.update(s, employer, job, change, today=TODAY)
                        else:
                            jobs.delete_by_id(s, employer, job_id)
                    except NotFound:
                        pass  # deleted by another writer since it was picked

        return write

    def upkeeper(stop: threading.Event) -> None:
        day = TODAY
        while not stop.is_set():
            with session_scope(factory) as s:
                upkeep.expire(s, today=day)
                upkeep.refresh(s, today=day)
            day += timedelta(days=1)

    def reader(n: int) -> Callable[[threading.Event], None]:
        def read(stop: threading.Event) -> None:
            rng = random.Random(100 + n)
            while not stop.is_set():
                employer_id = rng.choice(ids)
                q = rng.choice([None, WORD, WORD, "a"])
                status = rng.choice([None, None, *STATUSES])
                page, size = rng.choice([1, 1, 2, 4]), rng.choice([1, 5, 10])
                connection = committed.connect()
                if connection.dialect.name == "postgresql":  # one snapshot for the whole read
                    connection = connection.execution_options(isolation_level="REPEATABLE READ")
                with connection, connection.begin():
                    before = kept.get(employer_id, status, q or "")
                    got = job_listing.listing(
                        connection,
                        employer_id,
                        q=q,
                        status=status,
                        page=page,
                        page_size=size,
                        totals=kept,
                    )
                    total, order = expected(connection, employer_id, q, status)
                    asked = f"employer {employer_id}, q={q}, status={status}, page {page} of {size}"
                    assert got.total == total, asked
                    assert [j.id for j in got.jobs] == order[(page - 1) * size : page * size], asked
                    now = connection.scalar(
                        select(tallies.of_employer(employer_id, None).c.changes)
                    )
                    if q and before is not None and before.changes == now:
                        served_kept.append(1)
                reads.append(1)

        return read

    race([writer(1), writer(2), writer(3), upkeeper, reader(1), reader(2)], RACE_SECONDS)
    assert len(reads) > 20
    assert served_kept, "no read was served a kept total: the race did not test them"
    with committed.connect() as connection:
        for employer_id in ids:
            assert tallied(connection, employer_id) == counted(connection, employer_id)
            assert rows_of(connection, employer_id) <= COMPACT_AFTER + 3  # writers summed them


def test_a_writer_does_not_wait_for_another_summing_the_same_rows(committed: Engine) -> None:
    """Two transactions add jobs of one employer, each past COMPACT_AFTER rows, so each sums
    the employer's rows; the first stays open. The second must not wait for it: it leaves
    the rows the first holds (on PostgreSQL) to it. SQLite writers take turns anyway, so
    there the second waits by design, and only the sums are checked."""
    factory = make_sessionmaker(committed)
    employer_id = seed(factory, "Summing Corp", 0)
    add = insert(Job).values(
        employer_id=employer_id,
        title="Job",
        search_text="job",
        publish_date=TODAY,
        close_date=TODAY,
        status="active",
        position_type_id=1,
        description="<p>Work.</p>",
        routing_type=1,
        application_email="jobs@race.test",
        updated_at=utcnow(),
    )
    with session_scope(factory) as s:  # committed rows, which both will want to sum
        for _ in range(COMPACT_AFTER // 2):
            s.execute(add)
    postgres = committed.dialect.name == "postgresql"
    done = threading.Event()

    def second() -> None:
        with session_scope(factory) as s:
            for _ in range(COMPACT_AFTER + 4):
                s.execute(add)
        done.set()

    thread = threading.Thread(target=second)
    with factory() as first:
        for _ in range(COMPACT_AFTER + 4):
            first.execute(add)
        assert rows_of(first.connection(), employer_id) <= COMPACT_AFTER + 1  # it summed
        if postgres:
            thread.start()
            assert done.wait(20), "the second writer waited for the first's transaction"
        first.commit()
    if not postgres:
        thread.start()
    thread.join(timeout=60)
    assert done.is_set()
    with committed.connect() as connection:
        assert tallied(connection, employer_id) == {"active": COMPACT_AFTER // 2 + 72}
        assert counted(connection, employer_id) == {"active": COMPACT_AFTER // 2 + 72}
