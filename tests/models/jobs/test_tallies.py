"""C6 `total` from job_tallies (migration 0007): whatever changes the jobs (the API's writes,
upkeep's set-based UPDATEs, deletes, an employer's cascade, plain SQL), the database's
triggers keep each employer's count by status, on both backends; the sum of changes grows
with every change that could move a search's total, and only then."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, delete, func, insert, select, text, update
from sqlalchemy.orm import Session

from models import employers
from models.core.dates import utcnow
from models.db.entities import Employer, Job, JobTally
from models.db.migrate import alembic_config
from models.jobs import search as job_search
from models.jobs import tallies, upkeep
from models.jobs import writes as jobs
from tests.factories import job_body

TODAY = date(2026, 3, 10)
COMPACT_AFTER = 32  # migration 0007


def counted(connection: Connection, employer_id: int) -> dict[str, int]:
    """The employer's jobs by status, counted in jobs."""
    rows = connection.execute(
        select(Job.status, func.count()).where(Job.employer_id == employer_id).group_by(Job.status)
    )
    return {status: n for status, n in rows}


def tallied(connection: Connection, employer_id: int) -> dict[str, int]:
    """The employer's jobs by status, as job_tallies has them (statuses with none left out)."""
    rows = connection.execute(
        select(JobTally.status, func.sum(JobTally.jobs))
        .where(JobTally.employer_id == employer_id)
        .group_by(JobTally.status)
    )
    return {status: int(n) for status, n in rows if n}


def changes(connection: Connection, employer_id: int) -> int:
    found = connection.scalar(
        select(func.coalesce(func.sum(JobTally.changes), 0)).where(
            JobTally.employer_id == employer_id
        )
    )
    return int(found or 0)


def rows_of(connection: Connection, employer_id: int) -> int:
    return int(
        connection.scalar(select(func.count()).where(JobTally.employer_id == employer_id)) or 0
    )


def put(session: Session, employer: Employer, job_id: int, body: dict[str, Any]) -> object:
    """PUT /jobs/{id}: the job read locked, then changed (models.jobs.writes)."""
    job = jobs.get(session, employer, job_id, for_update=True)
    return jobs.update(session, employer, job, body, today=TODAY)


def add_jobs(session: Session, employer_id: int, specs: list[tuple[str, str]]) -> None:
    """Jobs (title, status) inserted by one plain statement, as a load or a sync might."""
    session.execute(
        insert(Job),
        [
            {
                "employer_id": employer_id,
                "title": title,
                "search_text": job_search.search_text(title, None),
                "publish_date": TODAY - timedelta(days=i % 30),
                "close_date": TODAY + timedelta(days=(i % 7) - 3),
                "status": status,
                "auto_refresh": True,
                "position_type_id": 1,
                "description": "<p>Work.</p>",
                "routing_type": 1,
                "application_email": "jobs@tally.test",
                "updated_at": utcnow(),
            }
            for i, (title, status) in enumerate(specs)
        ],
    )


@pytest.fixture
def employer(session: Session) -> Employer:
    return employers.create_employer(session, "Tally Corp", "unlimited")


def test_every_way_of_changing_jobs_is_counted(session: Session, employer: Employer) -> None:
    """Each step changes the jobs another way; after each, the tallies are the count."""
    other = employers.create_employer(session, "Other Corp")
    connection = session.connection()
    made = [
        jobs.create(session, employer, job_body(title=f"Job {i}", status=s), today=TODAY)
        for i, s in enumerate(["active", "active", "draft", "archived", "active"])
    ]
    add_jobs(session, employer.id, [(f"Bulk {i}", "active") for i in range(20)])
    add_jobs(session, other.id, [("Theirs", "draft")] * 3)

    def check() -> None:
        session.flush()
        for who in (employer, other):
            assert tallied(connection, who.id) == counted(connection, who.id)

    steps: list[Callable[[], object]] = [
        lambda: put(session, employer, made[2].id, {"status": "active"}),
        lambda: put(session, employer, made[0].id, {"status": "archived"}),
        lambda: put(session, employer, made[1].id, {"title": "Renamed"}),
        lambda: jobs.delete_by_id(session, employer, made[3].id),
        lambda: upkeep.expire(session, today=TODAY),  # set-based, over both employers
        lambda: upkeep.refresh(session, today=TODAY + timedelta(days=30)),
        lambda: session.execute(
            update(Job).where(Job.employer_id == other.id).values(status="active")
        ),
        lambda: session.execute(
            delete(Job).where(Job.employer_id == employer.id, Job.title.like("Bulk 1%"))
        ),
        lambda: session.execute(delete(Employer).where(Employer.id == other.id)),  # cascades
    ]
    check()
    for step in steps:
        step()
        check()
    assert tallied(connection, other.id) == {}  # the cascade's jobs are gone from the count


@pytest.mark.parametrize(
    ("change", "moves"),
    [
        (lambda s, e, j: put(s, e, j.id, {"title": "Baker"}), True),
        (lambda s, e, j: put(s, e, j.id, {"referenceId": "R-9"}), True),
        (lambda s, e, j: put(s, e, j.id, {"status": "archived"}), True),
        (lambda s, e, j: jobs.delete_by_id(s, e, j.id), True),
        (lambda s, e, j: jobs.create(s, e, job_body(), today=TODAY), True),
        (lambda s, e, j: put(s, e, j.id, {"description": "<p>Other</p>"}), False),
        (lambda s, e, j: put(s, e, j.id, {"confidential": True}), False),
        (lambda s, e, j: put(s, e, j.id, {"title": "Senior Baker", "confidential": True}), False),
        (lambda s, e, j: upkeep.refresh(s, today=TODAY + timedelta(days=30)), False),
    ],
    ids=[
        "title", "referenceId", "status", "delete", "create", "description", "confidential",
        "same title", "refresh",
    ],
)  # fmt: skip
def test_changes_grow_with_what_can_move_a_search_total(
    session: Session, employer: Employer, change: Any, moves: bool
) -> None:
    """A search's total kept by a web process is served while the employer's changes sum to
    what they did when it was counted: every change that can move it must grow the sum, and
    others need not (each would make the next search count again)."""
    job = jobs.create(
        session, employer, job_body(status="active", autoRefresh=True), today=TODAY - timedelta(10)
    )
    session.flush()
    connection = session.connection()
    before = changes(connection, employer.id)
    written = connection.execute(select(Job.version).where(Job.id == job.id)).scalar_one()
    change(session, employer, job)
    session.flush()
    assert (changes(connection, employer.id) > before) is moves
    if not moves:  # the job was written all the same
        assert connection.scalar(select(Job.version).where(Job.id == job.id)) == written + 1


def test_an_employers_rows_are_summed_as_they_grow(session: Session, employer: Employer) -> None:
    """One row per change, summed into one per status past COMPACT_AFTER rows: a list reads
    a few rows however many changes the employer made."""
    connection = session.connection()
    # SQLite may give the employer the id of one deleted before: its rows, no jobs left.
    before = changes(connection, employer.id)
    for i in range(3 * COMPACT_AFTER + 5):
        add_jobs(session, employer.id, [(f"Job {i}", ("active", "draft")[i % 2])])
        assert rows_of(connection, employer.id) <= COMPACT_AFTER + 1
    assert tallied(connection, employer.id) == counted(connection, employer.id)
    assert tallied(connection, employer.id) == {"active": 51, "draft": 50}
    assert changes(connection, employer.id) == before + 101


# SQLite has no TRUNCATE: its DELETE without WHERE runs the row triggers (tested above).
@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
def test_a_truncate_leaves_no_jobs_and_more_changes(session: Session, employer: Employer) -> None:
    connection = session.connection()
    add_jobs(session, employer.id, [("Job", "active")] * 4)
    before = changes(connection, employer.id)
    connection.execute(text("TRUNCATE jobs CASCADE"))
    assert tallied(connection, employer.id) == {}
    assert changes(connection, employer.id) > before


def test_rebuild_counts_again_with_more_changes(session: Session, employer: Employer) -> None:
    """For a load that went around the triggers (the bench's COPY): the count is made again,
    and the changes grow, so no total kept from before is taken for one of the new state."""
    connection = session.connection()
    add_jobs(session, employer.id, [("Job", "active"), ("Job", "draft"), ("Job", "draft")])
    before = changes(connection, employer.id)
    connection.execute(update(JobTally).values(jobs=7))  # counts gone wrong
    tallies.rebuild(connection)
    assert tallied(connection, employer.id) == {"active": 1, "draft": 2}
    assert changes(connection, employer.id) > before
    jobs.create(session, employer, job_body(status="active"), today=TODAY)
    session.flush()
    assert tallied(connection, employer.id) == {"active": 2, "draft": 2}


def test_migration_0007_counts_the_jobs_already_there(session: Session, employer: Employer) -> None:
    """Down to 0006 (no tallies, no triggers) and up again, inside the test's transaction:
    the jobs stored before are counted, and the ones written after too."""
    connection = session.connection()
    cfg = alembic_config(connection.engine)
    cfg.attributes["connection"] = connection
    command.downgrade(cfg, "0006")
    add_jobs(session, employer.id, [("Old", "active")] * 3 + [("Old", "archived")])
    command.upgrade(cfg, "head")
    assert tallied(connection, employer.id) == {"active": 3, "archived": 1}
    jobs.create(session, employer, job_body(status="draft"), today=TODAY)
    session.flush()
    assert tallied(connection, employer.id) == {"active": 3, "archived": 1, "draft": 1}


def test_kept_search_totals_are_bounded() -> None:
    """Each web process keeps at most max_entries totals, the least recently used leaving
    first, and none for a q longer than KEPT_Q."""
    kept = tallies.SearchTotals(max_entries=3)
    counted_ = tallies.Counted(changes=1, total=2, jobs=3)
    for word in ("a", "b", "c"):
        kept.put(1, None, word, counted_)
    assert kept.get(1, None, "a") == counted_  # used: "b" is now the oldest
    kept.put(1, None, "d", counted_)
    assert len(kept) == 3
    assert kept.get(1, None, "b") is None
    assert kept.get(1, None, "a") == counted_
    assert kept.get(1, "active", "a") is None and kept.get(2, None, "a") is None
    kept.put(1, None, "x" * (tallies.KEPT_Q + 1), counted_)
    assert kept.get(1, None, "x" * (tallies.KEPT_Q + 1)) is None
    tallies.SearchTotals(max_entries=0).put(1, None, "a", counted_)  # keeps nothing, fails not
