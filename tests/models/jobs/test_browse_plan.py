"""The public search reads its indexes (C17): right answers would not show a lost index, the
plan does. Each statement is the one `browse.search` runs, explained on PostgreSQL over enough
open jobs that reading them all would cost. A database of the module's own: ANALYZE changes
PostgreSQL's row counts in place, and the suite's other jobs would tip the planner."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.orm import Session

from models.db.entities import Job, JobLocation, Location
from models.jobs import browse
from models.jobs.feeds import Filters
from tests.conftest import migrated
from tests.models.jobs.test_job_search import _add_jobs, two_employers
from tests.plans import explained

__all__ = ["two_employers"]  # the fixture, shared with the search tests
TODAY = date(2026, 11, 22)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    with migrated(request.param, tmp_path_factory.mktemp("browse-plan")) as eng:
        yield eng


def _plans(session: Session, filters: Filters) -> tuple[list[str], list[str]]:
    """The titles `browse.search` finds, and the plan of its first statement (PostgreSQL)."""
    found, plan = explained(session, lambda: browse.search(session.connection(), filters, TODAY))
    return [job.title for job in found.jobs], plan


@pytest.fixture
def filled(session: Session, two_employers: tuple[Any, Any]) -> int:
    """Thousands of open jobs of two employers in one place, and one job in a rare place;
    the rare place's id."""
    ours, theirs = two_employers
    postgres = session.connection().dialect.name == "postgresql"
    if postgres:
        _add_jobs(session, ours.id, [f"Filler job {i}" for i in range(4000)], "F")
    _add_jobs(session, theirs.id, ["Rare place plumber"], "P")
    common, rare = session.scalars(select(Location.id).order_by(Location.id).limit(2)).all()
    rows = session.execute(select(Job.id, Job.title)).all()
    places = [
        {"job_id": i, "position": 0, "location_id": rare if t.startswith("Rare") else common}
        for i, t in rows
    ]
    session.execute(insert(JobLocation), places)
    if postgres:
        session.connection().exec_driver_sql("ANALYZE jobs")
        session.connection().exec_driver_sql("ANALYZE job_locations")
    return int(rare)


def test_q_across_employers_reads_the_open_jobs_gram_index(session: Session, filled: Any) -> None:
    titles, plan = _plans(session, Filters(q="zephyr"))
    assert titles and all("zephyr" in t.casefold() for t in titles)
    if plan:
        assert any("ix_jobs_open_grams" in line for line in plan), "\n".join(plan)


def test_a_rare_place_reads_its_own_jobs(session: Session, filled: Any) -> None:
    titles, plan = _plans(session, Filters(place=filled))
    assert titles == ["Rare place plumber"]
    if plan:
        assert any("ix_job_locations_location" in line for line in plan), "\n".join(plan)
