"""`models.jobs.writes.apply`, the one entry point of a write by referenceId (C4, C10), which the
API's PUT /jobs and sync runs' items (C11) share: its outcomes, its warnings, its domain
errors, and dry runs that send no statement that writes (nothing to roll back)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from models import employers
from models.core.errors import DuplicateReferenceId, PreconditionFailed, ValidationFailed
from models.db.entities import Employer, Job, JobLocation
from models.jobs import writes as jobs
from models.jobs.rows import StoredJob
from tests.factories import job_body

TODAY = date(2026, 3, 10)


@pytest.fixture
def employer(session: Session) -> Employer:
    return employers.create_employer(session, "Apply Corp")


@pytest.fixture
def writes(session: Session) -> Iterator[list[str]]:
    """The statements that write, sent on the session's connection from now on."""
    sent: list[str] = []

    def keep(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        head = statement.lstrip().upper()
        if head.startswith(("INSERT", "UPDATE", "DELETE", "WITH")):
            sent.append(statement)

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", keep)
    yield sent
    event.remove(engine, "before_cursor_execute", keep)


def count(session: Session, employer: Employer) -> int:
    query = select(func.count()).select_from(Job).where(Job.employer_id == employer.id)
    return session.scalar(query) or 0


def test_apply_creates_then_updates_then_changes_nothing(
    session: Session, employer: Employer
) -> None:
    body = job_body(referenceId="A-1", status="active")
    created = jobs.apply(session, employer, body, today=TODAY)
    assert created.outcome == "created" and created.job.id > 0 and created.job.version == 1
    assert created.warnings == []
    updated = jobs.apply(session, employer, {"referenceId": "A-1", "title": "B"}, today=TODAY)
    assert updated.outcome == "updated" and updated.job.id == created.job.id
    assert updated.job.version == 2 and updated.job.title == "B"
    same = jobs.apply(session, employer, {**body, "title": "B"}, today=TODAY)
    assert same.outcome == "unchanged" and same.job == updated.job
    stored = jobs.get(session, employer, created.job.id)
    assert stored.version == 2 and stored == same.job


def test_a_dry_run_sends_no_write(session: Session, employer: Employer, writes: list[str]) -> None:
    """A dry run, whatever its outcome, sends no INSERT, UPDATE or DELETE: the caller's
    transaction (a sync item's) holds nothing to undo."""
    job = jobs.apply(session, employer, job_body(referenceId="D-1"), today=TODAY).job
    session.flush()
    writes.clear()
    place = [{"description": "Vanderhoof, BC"}]
    created = jobs.apply(
        session, employer, job_body(referenceId="D-2", locations=place), today=TODAY, dry_run=True
    )
    assert created.outcome == "created" and created.job.id == 0
    assert [(w.field, w.code) for w in created.warnings] == [
        ("locations[0].description", "location_added")
    ]
    change = {"referenceId": "D-1", "title": "Dry", "locations": place}
    updated = jobs.apply(session, employer, change, today=TODAY, dry_run=True)
    assert updated.outcome == "updated" and updated.job.title == "Dry"
    assert updated.job.version == job.version
    same = jobs.apply(session, employer, job_body(referenceId="D-1"), today=TODAY, dry_run=True)
    assert same.outcome == "unchanged"
    assert writes == []
    assert count(session, employer) == 1
    assert jobs.get(session, employer, job.id).title == job.title


def test_put_and_post_share_the_outcomes(session: Session, employer: Employer) -> None:
    posted = jobs.post(session, employer, job_body(), today=TODAY)
    assert posted.outcome == "created"
    locked = jobs.locked(session, employer, posted.job.id)
    assert jobs.put(session, employer, locked, {"title": "Senior Baker"}, today=TODAY).outcome == (
        "unchanged"
    )
    locked = jobs.locked(session, employer, posted.job.id)
    assert jobs.put(session, employer, locked, {"title": "Baker"}, today=TODAY).outcome == (
        "updated"
    )
    dry = jobs.post(session, employer, job_body(), today=TODAY, dry_run=True)
    assert dry.outcome == "created" and dry.job.id == 0 and count(session, employer) == 1


def test_errors_are_the_domain_exceptions(session: Session, employer: Employer) -> None:
    jobs.apply(session, employer, job_body(referenceId="E-1"), today=TODAY)
    jobs.apply(session, employer, job_body(referenceId="E-2"), today=TODAY)
    for dry_run in (False, True):
        with pytest.raises(ValidationFailed) as invalid:
            jobs.apply(
                session, employer, {"referenceId": "E-1", "title": ""}, today=TODAY, dry_run=dry_run
            )
        assert [(e.field, e.code) for e in invalid.value.errors] == [("title", "too_short")]
        with pytest.raises(ValidationFailed):
            jobs.apply(session, employer, {"title": "No reference"}, today=TODAY, dry_run=dry_run)

        def refuse(job: StoredJob | None) -> None:
            raise PreconditionFailed("no")

        with pytest.raises(PreconditionFailed):
            jobs.apply(
                session, employer, job_body(referenceId="E-1"), today=TODAY, dry_run=dry_run,
                expect=refuse,
            )  # fmt: skip
    e1 = session.scalar(select(Job).where(Job.reference_id == "E-1"))
    assert e1 is not None
    locked = jobs.locked(session, employer, e1.id)
    with pytest.raises(DuplicateReferenceId):
        jobs.put(session, employer, locked, {"referenceId": "E-2"}, today=TODAY, dry_run=True)
    with pytest.raises(DuplicateReferenceId):
        jobs.post(session, employer, job_body(referenceId="E-2"), today=TODAY, dry_run=True)


def test_unchanged_compares_the_arrays_too(session: Session, employer: Employer) -> None:
    """The row may be as stored while a location or category differs, or is in another
    order: that is a change."""
    body = job_body(
        referenceId="R-1",
        locations=[{"description": "Toronto, ON"}, {"description": "Calgary, AB"}],
        categories=[{"id": 1}, {"id": 2}],
    )
    jobs.apply(session, employer, body, today=TODAY)
    swapped = {**body, "locations": body["locations"][::-1]}
    assert jobs.apply(session, employer, swapped, today=TODAY).outcome == "updated"
    fewer = {**swapped, "categories": [{"id": 1}]}
    applied = jobs.apply(session, employer, fewer, today=TODAY)
    assert applied.outcome == "updated" and applied.job.category_ids == (1,)
    assert jobs.apply(session, employer, fewer, today=TODAY).outcome == "unchanged"
    places = session.scalars(
        select(JobLocation.location_id)
        .where(JobLocation.job_id == applied.job.id)
        .order_by(JobLocation.position)
    ).all()
    assert list(places) == [p.id for p in applied.job.locations or ()]


def test_warnings_of_the_stored_state_come_with_an_unchanged_write(
    session: Session, employer: Employer
) -> None:
    soon = (TODAY + timedelta(days=1)).isoformat()
    body = job_body(referenceId="W-1", status="active", closeDate=soon)
    assert [w.code for w in jobs.apply(session, employer, body, today=TODAY).warnings] == [
        "closes_soon"
    ]
    again = jobs.apply(session, employer, body, today=TODAY)
    assert again.outcome == "unchanged" and [w.code for w in again.warnings] == ["closes_soon"]
