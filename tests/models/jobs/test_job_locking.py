"""Writes of one job at once, on PostgreSQL's committed transactions. C4: of two partial
PUTs the second waits for the first and merges into its result, so both go through and the
stored job is one both rules and both requests agree with. C8: an application waits for a
write of its job in flight and answers as the job then is."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.applications import service as applications
from models.core.errors import DomainError
from models.db.entities import Application, Employer, Location
from models.db.unit_of_work import make_sessionmaker
from models.jobs import writes as jobs
from models.reference import places
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
    email = _put(employer, job_id, {"applicationEmail": "hr@maple.test"})
    assert _while_held(factory, _put(employer, job_id, TO_URL), email) == {
        "waited": True,
        "done": True,
    }
    with factory() as s:
        stored = jobs.get(s, employer, job_id)
        route = (stored.routing_type, stored.application_url, stored.application_email)
        assert route == (2, "https://maple.test/apply", None)
        # Created, then written by the first PUT only: merged into its result, the second's
        # email is dropped with the email route, and a write that changes nothing stores
        # nothing (C10).
        assert stored.version == 2


def _while_held(
    factory: sessionmaker[Session],
    write: Callable[[Session], object],
    then: Callable[[Session], object],
) -> dict[str, Any]:
    """`write` runs and holds its transaction open while `then` is run in another, which
    must wait for it. Returns whether it waited and how it ended: done, refused (with the
    domain error's code) or an unexpected error."""
    written, may_commit = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def writer() -> None:
        with factory() as s:
            write(s)
            written.set()
            may_commit.wait(10)
            s.commit()

    def second() -> None:
        try:
            with factory() as s:
                then(s)
                s.commit()
                outcome["done"] = True
        except DomainError as e:
            outcome["refused"] = e.code
        except Exception as e:  # shown by the assertion
            outcome["error"] = repr(e)

    one = threading.Thread(target=writer)
    one.start()
    assert written.wait(10)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.5)
    outcome["waited"] = two.is_alive()
    may_commit.set()
    one.join(10)
    two.join(10)
    return outcome


APPLICANT = applications.Submission("Ann Smith", "ann@example.test", None, None, None)
TO_URL = {"applicantRoutingType": {"id": 2}, "applicationUrl": "https://maple.test/apply"}


def _apply(job_id: int) -> Callable[[Session], object]:
    return lambda s: applications.submit(s, applications.open_job(s, job_id), APPLICANT)


def _delete(employer: Employer, job_id: int) -> Callable[[Session], object]:
    return lambda s: jobs.delete_by_id(s, employer, job_id)


def _delete_reference(employer: Employer, ref: str) -> Callable[[Session], object]:
    return lambda s: jobs.delete_by_reference(s, employer, {"referenceId": ref})


def _put(employer: Employer, job_id: int, body: dict[str, Any]) -> Callable[[Session], object]:
    def put(s: Session) -> None:
        jobs.update(s, employer, jobs.get(s, employer, job_id, for_update=True), body, today=TODAY)

    return put


def test_an_application_to_a_job_being_deleted_is_a_404(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """Read before the delete committed and inserted after, the application broke its
    foreign key: a 500 where C8 answers 404 for a job that is not open."""
    factory, employer, job_id = committed
    outcome = _while_held(factory, _delete(employer, job_id), _apply(job_id))
    assert outcome == {"waited": True, "refused": "not_found"}


@pytest.mark.parametrize(
    ("change", "refused"),
    [({"status": "archived"}, "not_found"), (TO_URL, "apply_via_url")],
    ids=["archived", "url-routed"],
)
def test_an_application_to_a_job_being_closed_to_it_is_refused(
    committed: tuple[sessionmaker[Session], Employer, int], change: dict[str, Any], refused: str
) -> None:
    """No 202 for a job that, when the application commits, is archived or routed to a URL
    (C8): nothing is stored, so no copy goes to an address the employer has given up."""
    factory, employer, job_id = committed
    outcome = _while_held(factory, _put(employer, job_id, change), _apply(job_id))
    assert outcome == {"waited": True, "refused": refused}
    with factory() as s:
        stored = select(func.count()).where(Application.employer_id == employer.id)
        assert s.scalar(stored) == 0


def test_a_delete_of_a_job_being_deleted_is_a_404(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """Two DELETEs of one job at once: one 204, one 404 (C4), as if sent one after the other.
    Unlocked, both deleted it (the second's DELETE matching no row) and both answered 204."""
    factory, employer, job_id = committed
    delete = _delete(employer, job_id)
    assert _while_held(factory, delete, delete) == {"waited": True, "refused": "not_found"}


def test_a_delete_by_a_reference_id_being_changed_is_a_404(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """A PUT moves the job from referenceId A to B while a DELETE of A is sent: the DELETE
    finds no A (404), and the job stays, under B (C4). Unlocked, it deleted the renamed job."""
    factory, employer, job_id = committed
    with factory() as s:
        jobs.update(s, employer, jobs.get(s, employer, job_id), {"referenceId": "A"}, today=TODAY)
        s.commit()
    rename = _put(employer, job_id, {"referenceId": "B"})
    outcome = _while_held(factory, rename, _delete_reference(employer, "A"))
    assert outcome == {"waited": True, "refused": "not_found"}
    with factory() as s:
        assert jobs.get(s, employer, job_id).reference_id == "B"


def test_a_put_compares_with_the_job_as_the_lock_finds_it(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """C10: a PUT by id reads the job whole with its key, before its lock, and uses the
    locations and categories read then only while the locked version is the one it read.
    Here a concurrent write moves the job to Calgary meanwhile: this PUT, sending the
    Toronto the job had when it read it, is a change, not an unchanged write answered with
    the Toronto it read while Calgary stays stored."""
    factory, employer, job_id = committed
    toronto = [{"description": "Toronto, ON"}]
    outcomes: list[str] = []

    def stale_put(s: Session) -> None:
        known = jobs.get(s, employer, job_id)  # as the key's statement reads it, unlocked
        locked = jobs.locked(s, employer, job_id, known=known)
        applied = jobs.put(s, employer, locked, {"locations": toronto}, today=TODAY)
        outcomes.append(applied.outcome)

    calgary = _put(employer, job_id, {"locations": [{"description": "Calgary, AB"}]})
    assert _while_held(factory, calgary, stale_put) == {"waited": True, "done": True}
    assert outcomes == ["updated"]
    with factory() as s:
        stored = jobs.get(s, employer, job_id)
        assert [p.description for p in stored.locations or ()] == ["Toronto, ON"]
        assert stored.version == 3


def test_of_two_writes_adding_one_place_only_the_first_says_so(
    committed: tuple[sessionmaker[Session], Employer, int],
) -> None:
    """C10 `location_added`: the second write waits for the first's listing of the place,
    then finds it listed, and adds nothing."""
    factory, employer, _job_id = committed
    body = job_body(locations=[{"description": "Fort Nelson, BC"}])
    said: list[list[str]] = []

    def post(s: Session) -> None:
        said.append([w.code for w in jobs.post(s, employer, body, today=TODAY).warnings])

    with factory() as s:
        place = places.find(s.connection(), "Fort Nelson, BC")
    assert place is not None
    try:
        assert _while_held(factory, post, post) == {"waited": True, "done": True}
        assert said == [["location_added"], []]
    finally:
        with factory() as s:  # the place leaves the list again, as the other tests expect
            s.execute(update(Location).where(Location.id == place.id).values(listed=False))
            s.commit()
