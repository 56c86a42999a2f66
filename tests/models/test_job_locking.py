"""C4 partial PUTs of one job at once, on PostgreSQL's committed transactions: the second
waits for the first and merges into its result, so both go through and the stored job is one
both rules and both requests agree with."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session, sessionmaker

from models import employers, jobs
from models.db import make_sessionmaker
from models.entities import Employer
from tests.factories import job_body

TODAY = date(2026, 11, 22)


# SQLite writers hold the whole database from their first statement (BEGIN IMMEDIATE).
pytestmark = pytest.mark.parametrize("engine", ["postgresql"], indirect=True)


@pytest.fixture
def committed(engine: Engine) -> Iterator[tuple[sessionmaker[Session], Employer, int]]:
    factory = make_sessionmaker(engine)
    with factory() as s:
        employer = employers.create_employer(s, "Two Writers Inc")
        job = jobs.create(s, employer, job_body(status="active"), today=TODAY)
        s.commit()
        ids = employer.id, job.id
    with factory() as s:
        yield factory, s.get_one(Employer, ids[0]), ids[1]
    with factory() as s:
        s.execute(delete(Employer).where(Employer.id == ids[0]))
        s.commit()


def test_a_put_waits_for_a_concurrent_put_of_the_same_job(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """The first routes the job to a URL; the second, sent meanwhile, gives an application
    email. Merged into the job as it was before the first committed, the second would store
    the email beside the URL route, which C4 forbids ("the field of the other route is stored
    and returned as null"). Waiting, it merges into the first's result, as if sent after it."""
    factory, employer, job_id = committed
    first_flushed, first_may_commit = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}
    to_url = {"applicantRoutingType": {"id": 2}, "applicationUrl": "https://maple.test/apply"}

    def first() -> None:
        with factory() as s:
            job = jobs.get(s, employer, job_id, for_update=True)
            jobs.update(s, employer, job, to_url, today=TODAY)
            first_flushed.set()
            first_may_commit.wait(10)
            s.commit()

    def second() -> None:
        try:
            with factory() as s:
                job = jobs.get(s, employer, job_id, for_update=True)
                jobs.update(s, employer, job, {"applicationEmail": "hr@maple.test"}, today=TODAY)
                s.commit()
                outcome["done"] = True
        except Exception as e:  # shown by the assertion
            outcome["error"] = repr(e)

    one = threading.Thread(target=first)
    one.start()
    assert first_flushed.wait(10)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.5)
    assert two.is_alive()  # waiting for the first to commit
    first_may_commit.set()
    one.join(10)
    two.join(10)
    assert outcome == {"done": True}
    with factory() as s:
        stored = jobs.get(s, employer, job_id)
        route = (stored.routing_type, stored.application_url, stored.application_email)
        assert route == (2, "https://maple.test/apply", None)
        assert stored.version == 3  # created, then each PUT once
