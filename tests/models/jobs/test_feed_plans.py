"""The change feeds read their indexes (migration 0009): a feed page is a range read from a
position that stops after the page, whoever the employer and however many jobs or
applications it holds. Right answers would not show a lost index; the plans do."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, insert, text
from sqlalchemy.orm import Session

from models import employers
from models.applications import service as applications
from models.db.entities import Application, Job
from models.db.feed import Position
from models.jobs import changes as job_changes
from models.jobs import search as job_search
from tests.conftest import migrated

START = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """A database of the module's own: ANALYZE updates PostgreSQL's row counts in place, even
    in a transaction rolled back, and would mislead the plans of the suite's other tests."""
    with migrated(request.param, tmp_path_factory.mktemp("plans")) as engine:
        yield engine


@pytest.fixture
def session(database: Engine) -> Iterator[Session]:
    connection = database.connect()
    outer = connection.begin()
    s = Session(bind=connection, join_transaction_mode="create_savepoint")
    yield s
    s.close()
    outer.rollback()
    connection.close()


ROWS = 3000


def _fill(session: Session) -> tuple[Any, int]:
    """An employer with ROWS jobs changed a second apart, the first with ROWS applications,
    and another employer with as many jobs."""
    ours = employers.create_employer(session, "Ours")
    theirs = employers.create_employer(session, "Theirs")
    session.flush()
    for owner in (ours, theirs):
        session.execute(
            insert(Job),
            [
                {
                    "employer_id": owner.id,
                    "reference_id": f"R{i}",
                    "title": f"Job {i}",
                    "search_text": job_search.search_text(f"Job {i}", f"R{i}"),
                    "publish_date": date(2026, 11, 1),
                    "close_date": date(2026, 12, 31),
                    "status": "active",
                    "position_type_id": 1,
                    "description": "<p>work</p>",
                    "routing_type": 1,
                    "application_email": "jobs@example.com",
                    "updated_at": START + timedelta(seconds=i),
                }
                for i in range(ROWS)
            ],
        )
    job_id = session.execute(
        text("SELECT min(id) FROM jobs WHERE employer_id = :e"), {"e": ours.id}
    ).scalar_one()
    session.execute(
        insert(Application),
        [
            {
                "job_id": job_id,
                "employer_id": ours.id,
                "name": "Ada",
                "email": "ada@example.org",
                "received_at": START + timedelta(seconds=i),
                "job_title": "Job 0",
                "application_email": "jobs@example.com",
                "employer_name": "Ours",
            }
            for i in range(ROWS)
        ],
    )
    session.execute(text("ANALYZE"))
    return ours, job_id


def _plan(connection: Connection, run: Any, which: int = -1) -> str:
    """The plan of the one statement `run` sends (the last, for the ORM's, before the load of
    the applications' bounces, C22; or the one `which` names)."""
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    event.listen(connection, "before_cursor_execute", keep)
    try:
        run()
    finally:
        event.remove(connection, "before_cursor_execute", keep)
    statement, params = [x for x in seen if "FROM bounces" not in x[0]][which]
    if connection.dialect.name == "postgresql":
        raw: Any = connection.connection.dbapi_connection
        return "\n".join(r[0] for r in raw.execute("EXPLAIN " + statement, params).fetchall())
    rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
    return "\n".join(str(r[-1]) for r in rows)


def test_the_jobs_feed_reads_the_employers_updated_at_index(session: Session) -> None:
    ours, _ = _fill(session)
    connection = session.connection()
    after = Position(START + timedelta(seconds=ROWS // 2), 0)
    until = START + timedelta(days=1)

    def run() -> None:
        found = job_changes.changes(
            connection, ours.id, after=after, until=until, q=None, status=None, limit=10
        )
        titles = [getattr(j, "title", None) for j in found.jobs]
        assert titles == [f"Job {ROWS // 2 + i}" for i in range(10)]

    plan = _plan(connection, run, which=0)  # the jobs' statement; the deletions' follows
    assert "ix_jobs_employer_updated" in plan, plan


def test_the_applications_feeds_read_their_indexes(session: Session) -> None:
    """Also under a session TimeZone other than UTC: a position bound as timestamptz would
    shift the stored UTC times by it (the feed started 8 hours off)."""
    ours, job_id = _fill(session)
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        session.execute(text("SET LOCAL TIME ZONE 'America/Vancouver'"))
    after = Position(START + timedelta(seconds=ROWS // 2), 0)
    until = START + timedelta(days=1)
    for of_job, index in (
        (None, "ix_applications_employer_received"),
        (job_id, "ix_applications_job_received"),
    ):

        def run(of_job: int | None = of_job) -> None:
            found = applications.changes(
                session, ours, job_id=of_job, status=None, after=after, until=until, limit=10
            )
            assert len(found.applications) == 10
            assert found.applications[0].received_at == after.at

        plan = _plan(connection, run)
        assert index in plan, plan
