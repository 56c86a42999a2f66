"""C10's promise behind the lag: no transaction commits a change of a job (or a new
application) stamped longer ago than half of CHANGE_FEED_LAG_SECONDS (`models.db.feed`). The
clock that stamps and checks is moved forward here, the one seam of time in the module."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.db import feed
from models.db.entities import Employer
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import listing as job_listing
from models.jobs import writes as jobs
from tests.conftest import Api
from tests.factories import JOBS, create_job, job_body, problem


class Steps:
    """A clock that moves `step` seconds at each reading."""

    def __init__(self, step: float) -> None:
        self.step, self.now = timedelta(seconds=step), utcnow()

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def use(step: float) -> None:
        monkeypatch.setattr(feed, "utcnow", Steps(step))

    yield use


def test_a_write_too_slow_to_commit_within_the_lag_is_rolled_back(
    api: Api, employer: Any, steps: Any
) -> None:
    """C10 with the default lag (5 s): 3 s between the stamp and the commit is more than
    half of it. The API answers 503 database_unavailable (retry), and nothing is stored."""
    job = create_job(api, employer)
    steps(3.0)
    result = api.put(f"{JOBS}/{job['id']}", key=employer.key, json={"title": "Late"})
    body = problem(result, 503, "database_unavailable")
    assert result.headers["Retry-After"] == "5" and "Late" not in str(body)
    steps(0.0)
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job
    created = api.post(JOBS, key=employer.key, json=job_body(referenceId="NEW"))
    assert created.status_code == 201


def test_a_write_within_half_the_lag_commits(api: Api, employer: Any, steps: Any) -> None:
    job = create_job(api, employer)
    steps(2.0)
    result = api.put(f"{JOBS}/{job['id']}", key=employer.key, json={"title": "In time"})
    assert result.status_code == 200
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json["title"] == "In time"


def test_the_lag_of_a_sessionmaker_is_the_setting_it_was_made_with(
    engine: Engine, sessions: sessionmaker[Session], employer: Any, steps: Any
) -> None:
    """`make_sessionmaker(engine, CHANGE_FEED_LAG_SECONDS)` hands the lag to its sessions:
    3 s between stamp and commit is within half of 60 s, not half of 4 s."""
    assert make_sessionmaker(engine, 4.0).kw["info"] == {feed.LAG: 4.0}
    for lag, fails in ((60.0, False), (4.0, True)):
        factory = sessionmaker(**{**sessions.kw, "info": {feed.LAG: lag}})
        steps(3.0)
        try:
            with session_scope(factory) as session:
                owner = session.get(Employer, employer.id)
                assert owner is not None
                jobs.create(session, owner, job_body(title=f"Lag {lag}"), today=date(2026, 3, 10))
        except feed.ChangeTooSlow:
            assert fails
        else:
            assert not fails
    with sessions() as session:
        page = job_listing.listing(
            session.connection(), employer.id, q=None, status=None, page=1, page_size=10
        )
    assert [j.title for j in page.jobs] == ["Lag 60.0"]


def test_an_application_too_slow_to_commit_is_not_stored(
    api: Api, employer: Any, sessions: sessionmaker[Session], steps: Any
) -> None:
    """receivedAt is the applications feed's time: its transaction keeps to the lag too."""
    job = create_job(api, employer, status="active")
    steps(3.0)
    result = api.post(
        f"{JOBS}/{job['id']}/applications", json={"name": "Ada", "email": "ada@example.org"}
    )
    problem(result, 503, "database_unavailable")
    steps(0.0)
    listed = api.get("/api/v1.1/applications", key=employer.key).json
    assert listed["paging"]["total"] == 0
