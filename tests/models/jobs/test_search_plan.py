"""The search reads its index (C6): right answers would not show a lost index; the plan does.
A database of the module's own: ANALYZE updates PostgreSQL's row counts in place, even in a
transaction rolled back, and the suite's other jobs would tip the planner."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from models.jobs import listing as job_listing
from tests.conftest import migrated
from tests.models.jobs.test_job_search import _add_jobs, two_employers

__all__ = ["two_employers"]  # the fixture, shared with the search tests


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    with migrated(request.param, tmp_path_factory.mktemp("search-plan")) as eng:
        yield eng


def test_the_search_index_serves_a_search_on_postgresql(
    session: Session, two_employers: tuple[Any, Any]
) -> None:
    """If the condition stopped matching the index's expression, searches would still be
    right but would read every job of the employer: the plan is what shows it. SQLite has
    no such index, and its statement does not ask for one."""
    ours, _ = two_employers
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    connection = session.connection()
    postgres = connection.dialect.name == "postgresql"
    if postgres:  # an employer with enough jobs that reading them all would cost
        _add_jobs(session, ours.id, [f"Filler job {i}" for i in range(3000)], "F")
        session.execute(text("ANALYZE jobs"))
    event.listen(connection, "before_cursor_execute", keep)
    try:
        job_listing.listing(connection, ours.id, q="zephyr", status=None, page=1, page_size=10)
    finally:
        event.remove(connection, "before_cursor_execute", keep)
    statement, params = seen[0]
    assert len(seen) == 1  # the page with its total and its jobs' locations
    if not postgres:
        assert "jobpost_search_grams" not in statement
        return
    raw: Any = connection.connection.dbapi_connection
    plan = "\n".join(r[0] for r in raw.execute("EXPLAIN " + statement, params).fetchall())
    assert "ix_jobs_search_grams" in plan, plan
    assert "WindowAgg" in plan  # the total comes from the same reading as the page
