"""Job operations shared by the API and the workers (C4, C5, C6). They write in the caller's
transaction and never commit. A job is read and written as plain values (`models.job_rows`)."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from sqlalchemy import BigInteger, Connection, Integer, String, Text, bindparam, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models import checks, job_rows, job_rules
from models.dates import default_close, utcnow
from models.entities import Employer, Job, JobLocation, Location
from models.errors import DuplicateReferenceId, FieldError, NotFound, ValidationFailed
from models.fast_reads import Precompiled, planned_for_values
from models.job_rows import StoredJob
from models.places import Place

# A write's precondition (C10), called with the job as the write locked it (None: no such job);
# it raises PreconditionFailed when the request's If-Match or If-None-Match does not hold.
Expect = Callable[[StoredJob | None], None]


def _anything(job: StoredJob | None) -> None:
    """No precondition."""


def read(connection: Connection, employer_id: int, job_id: int) -> StoredJob:
    """The employer's job; another employer's job is as absent as a missing one (C1)."""
    job = job_rows.read(connection, employer_id, job_id)
    if job is None:
        raise NotFound(f"No job has id {job_id}.")
    return job


def get(
    session: Session, employer: Employer, job_id: int, *, for_update: bool = False
) -> StoredJob:
    """The employer's job; with `for_update`, locked first (`locked`) and then read whole."""
    if for_update:
        return job_rows.complete(session.connection(), locked(session, employer, job_id))
    return read(session.connection(), employer.id, job_id)


def locked(session: Session, employer: Employer, job_id: int) -> StoredJob:
    """The employer's job, locked until commit, for a write (`update`): a concurrent PUT
    waits for this one to commit and then reads its result. Merging a partial PUT into a
    copy read before another's commit could store a job that breaks a rule between fields
    that neither request broke (C4: an application email kept beside the other's switch
    to a URL route)."""
    job = job_rows.lock(session.connection(), employer.id, job_id=job_id)
    if job is None:
        raise NotFound(f"No job has id {job_id}.")
    return job


def _check_reference_free(
    session: Session, employer: Employer, body: dict[str, Any], job: StoredJob | None
) -> None:
    """409 before 422 (C1): a used referenceId is refused before the other rules."""
    try:
        ref = checks.string(body.get("referenceId"), "referenceId", max_len=50)
    except checks.Invalid:
        return  # absent, or reported with the other rules (a NUL never reaches the database)
    if job and job.reference_id == ref:
        return
    if job_rows.holder(session.connection(), employer.id, ref) is not None:
        raise DuplicateReferenceId(f"This employer already has a job with referenceId {ref!r}.")


def _validated(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    job: StoredJob | None,
    today: date,
) -> dict[str, Any]:
    """The changes `body` makes, or the 422 of the rules it breaks; a used referenceId is
    looked for only then, to answer 409 instead (C1). A valid body's write finds it used
    by itself (`models.job_rows`), and is refused with the same 409."""
    try:
        return job_rules.validate(session, body, employer=employer, job=job, today=today)
    except ValidationFailed:
        _check_reference_free(session, employer, body, job)
        raise


def create(session: Session, employer: Employer, body: dict[str, Any], *, today: date) -> StoredJob:
    """POST: a new job; publishDate is today, status defaults to draft (C4, C5)."""
    changes = _validated(session, employer, body, job=None, today=today)
    job = _insert(session, employer, changes, today=today)
    if job is None:
        raise DuplicateReferenceId("This employer already has a job with that referenceId.")
    return job


def _insert(
    session: Session, employer: Employer, changes: dict[str, Any], *, today: date
) -> StoredJob | None:
    """None, and nothing written, when the referenceId is taken: by a concurrent request
    too, whose commit the insert waits for (PostgreSQL's ON CONFLICT)."""
    job = _merged(_new(employer.id, today), changes, today=today)
    job_id = job_rows.insert_job(session.connection(), job, _derived(job))
    return None if job_id is None else replace(job, id=job_id)


def _new(employer_id: int, today: date) -> StoredJob:
    """What a new job holds before its body's changes (which set every required member)."""
    return StoredJob(
        id=0,
        employer_id=employer_id,
        reference_id=None,
        title="",
        publish_date=today,
        close_date=default_close(today),
        confidential=False,
        auto_refresh=False,
        status="draft",
        position_type_id=0,
        salary_amount=None,
        salary_max=None,
        salary_period_id=None,
        salary_commission=False,
        description="",
        routing_type=0,
        application_email=None,
        application_url=None,
        version=1,
        locations=(),
        category_ids=(),
    )


def update(
    session: Session, employer: Employer, job: StoredJob, body: dict[str, Any], *, today: date
) -> StoredJob:
    """PUT: a partial update of `job`, read locked (`locked`); the merged job must satisfy
    every rule (C4)."""
    changes = _validated(session, employer, body, job=job, today=today)
    connection = session.connection()
    merged = job_rows.complete(connection, _merged(job, changes, today=today))
    try:
        job_rows.update_job(
            connection,
            merged,
            _derived(merged),
            locations="locations" in changes,
            categories="category_ids" in changes,
        )
    except IntegrityError:
        raise DuplicateReferenceId(
            "This employer already has a job with that referenceId."
        ) from None
    return replace(merged, version=job.version + 1)  # as the database counted it, locked


def upsert(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    today: date,
    expect: Expect = _anything,
) -> tuple[StoredJob, bool]:
    """PUT without id: update the job with this referenceId, or create it (C4).

    Returns the job and whether it was created. Idempotent, and safe when several requests
    create one new referenceId at once: the losers update the winner's job. `expect` is
    asked of the job as locked, or of None before a create, ahead of 409 and 422 (C10).
    """
    ref = _required_reference(session, employer, body, today=today)
    connection = session.connection()
    job = job_rows.lock(connection, employer.id, reference_id=ref)
    expect(job)
    if job is not None:
        return update(session, employer, job, body, today=today), False
    changes = job_rules.validate(session, body, employer=employer, job=None, today=today)
    created = _insert(session, employer, changes, today=today)
    if created is not None:
        return created, True
    job = job_rows.lock(connection, employer.id, reference_id=ref)
    if job is None:  # the winner was deleted meanwhile: nothing sensible but to retry
        raise DuplicateReferenceId("The referenceId is being changed; retry the request.")
    expect(job)  # If-None-Match: * loses to the concurrent create
    return update(session, employer, job, body, today=today), False


def _required_reference(
    session: Session, employer: Employer, body: dict[str, Any], *, today: date
) -> str:
    ref = body.get("referenceId")
    error: FieldError | None = None
    if ref is None or ref == "":
        error = FieldError("referenceId", "required", "referenceId is required to PUT without id.")
    else:
        try:
            return checks.string(ref, "referenceId", max_len=50)
        except checks.Invalid as e:
            error = e.error
    others: list[FieldError] = []
    try:
        job_rules.validate(session, body, employer=employer, job=None, today=today)
    except ValidationFailed as e:
        others = [f for f in e.errors if f.field != "referenceId"]
    raise ValidationFailed([error, *others], subject="job")


def _merged(job: StoredJob, changes: dict[str, Any], *, today: date) -> StoredJob:
    """`job` with validated changes; entering active (re-)publishes it (C5)."""
    values = {**job.__dict__, **changes}
    if changes.get("status") == "active" and job.status != "active":
        values["publish_date"] = today
        if "close_date" not in changes and job.close_date < today:
            values["close_date"] = default_close(today)
    if values["close_date"] is None:  # written as null: the default again (C4)
        values["close_date"] = default_close(values["publish_date"])
    return StoredJob(**values)


def _derived(job: StoredJob) -> dict[str, Any]:
    """What a write stores beside the job's values: its search text (C6), and when."""
    return {"search_text": search_text(job.title, job.reference_id), "updated_at": utcnow()}


def fold(text: str) -> str:
    """Text as `q` compares it (C6): caseless, and one form for what Unicode holds equivalent
    (NFKC around the casefold, in effect Unicode's NFKC_Casefold), so "Montréal" typed with
    a composed é finds a title sent with a decomposed one, and a full-width "ＣＯＯＫ" finds
    "cook". Done in Python so it matches alike on SQLite and PostgreSQL."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def search_text(title: str, reference_id: str | None) -> str:
    """What a search looks into: title and referenceId, folded, with a separator that `q`
    cannot hold (api.query refuses control characters)."""
    return fold(f"{title}\x1f{reference_id or ''}")


def delete_by_id(
    session: Session, employer: Employer, job_id: int, *, expect: Expect | None = None
) -> None:
    """DELETE /jobs/{id}: 404 when unknown. One statement, which waits for a write of the
    job in flight: of two DELETEs at once, the second finds the job gone (C4: a 404, where
    reading it unlocked first answered 204 twice for one job). With `expect` (C10), the job
    is locked and `expect` asked of it first."""
    if expect is not None:
        expect(locked(session, employer, job_id))
    if not job_rows.delete_job(session.connection(), employer.id, job_id=job_id):
        raise NotFound(f"No job has id {job_id}.")


def delete_by_reference(
    session: Session, employer: Employer, body: dict[str, Any], *, expect: Expect | None = None
) -> None:
    """DELETE /jobs with {"referenceId": …}: 404 when unknown; the referenceId is then free.
    With `expect` (C10), the job is locked and `expect` asked of it first."""
    try:
        ref = checks.string(body.get("referenceId"), "referenceId", max_len=50)
    except checks.Invalid as e:
        field = e.error
        if body.get("referenceId") in (None, ""):
            field = FieldError("referenceId", "required", "referenceId is required.")
        raise ValidationFailed([field], subject="request") from None
    if expect is not None:
        job = job_rows.lock(session.connection(), employer.id, reference_id=ref)
        if job is None:
            raise NotFound(f"No job has referenceId {ref!r}.")
        expect(job)
    # A PUT changing this job's referenceId is waited for, and the job is then no longer
    # matched by the old one (read unlocked, the renamed job was deleted: a DELETE answered
    # 204 for a referenceId the PUT's 200 had already given up, and took the job with it).
    if not job_rows.delete_job(session.connection(), employer.id, reference_id=ref):
        raise NotFound(f"No job has referenceId {ref!r}.")


GRAM = 3  # characters in a search gram (migration 0003)


def search_grams(employer_id: Any, content: Any) -> Any:
    """The grams the search index keeps of a job's (employer_id, search_text), or asks of a
    search's (employer id, q): PostgreSQL's `jobpost_search_grams` (migration 0003)."""
    return func.jobpost_search_grams(employer_id, content, type_=postgresql.ARRAY(Text))


@dataclass(frozen=True)
class Header:
    """A job as the list shows it (C6): plain values, read without the ORM."""

    id: int
    reference_id: str | None
    title: str
    publish_date: date
    confidential: bool
    status: str
    locations: list[Place]


@dataclass(frozen=True)
class Page:
    jobs: list[Header]
    total: int


def listing(
    connection: Connection,
    employer_id: int,
    *,
    q: str | None,
    status: str | None,
    page: int,
    page_size: int,
) -> Page:
    """The employer's jobs, newest publishDate first, then id (stable across pages, C6).

    `q` is a case-insensitive substring of title or referenceId, its `%` and `_` literal.
    On PostgreSQL a q of a gram or more also asks the gram index (migration 0003) for the
    rows holding every gram of it; LIKE decides among them."""
    folded = fold(q) if q else ""
    grams = len(folded) >= GRAM and connection.dialect.name == "postgresql"
    statements = _list_statements(bool(folded), grams, bool(status))
    params = {
        "employer_id": employer_id,
        "q": folded,
        "pattern": folded.replace("/", "//").replace("%", "/%").replace("_", "/_"),
        "status": status,
        "limit": page_size,
        "offset": (page - 1) * page_size,
    }
    with planned_for_values(connection):
        rows = statements.page.all(connection, params)
        if folded and rows:  # a search's page carries the total
            total = rows[0][_TOTAL_AT]
        elif folded and page == 1:
            total = 0
        else:  # no search, or no row to carry it: on a page past the last
            total = _count(statements, connection, params)
    return Page(jobs=_headers(rows, place_at=_TOTAL_AT + bool(folded)), total=total)


@dataclass(frozen=True)
class _ListStatements:
    page: Precompiled
    count: Precompiled


def _count(statements: _ListStatements, connection: Connection, params: dict[str, Any]) -> int:
    row = statements.count.first(connection, params)
    return int(row[0]) if row else 0


@functools.cache
def _list_statements(search: bool, grams: bool, status: bool) -> _ListStatements:
    """The page and count statements of one kind of list, built and compiled once: a list
    is read far more often than written, and building statements and ORM objects for each
    cost more than the database's answer.

    The page is one statement: its jobs' ids first, from the index alone (deep pages stay
    cheap), then their header columns and locations. A search reads every match to count
    them, so its page comes with the total, from that same reading; without q the count is
    an index-only scan, run apart."""
    employer = bindparam("employer_id", type_=Integer)
    where = [Job.employer_id == employer]
    if search:
        where.append(Job.search_text.contains(bindparam("pattern", type_=Text), escape="/"))
    if grams:
        wanted = search_grams(employer, bindparam("q", type_=Text))
        where.append(search_grams(Job.employer_id, Job.search_text).contains(wanted))
    if status:
        where.append(Job.status == bindparam("status", type_=String))
    order = (Job.publish_date.desc(), Job.id.desc())
    ids = select(Job.id).where(*where).order_by(*order)
    ids = ids.limit(bindparam("limit", type_=Integer))
    ids = ids.offset(bindparam("offset", type_=BigInteger))  # pages run to 2**31 - 1 (C6)
    if search:
        ids = ids.add_columns(func.count().over().label("total"))
    chosen = ids.subquery()
    columns = [Job.id, *_HEADER, *([chosen.c.total] if search else []), *_PLACE]
    page = (
        select(*columns)
        .select_from(chosen)
        .join(Job, Job.id == chosen.c.id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .order_by(*order, JobLocation.position)
    )
    count = select(func.count(Job.id)).where(*where)
    return _ListStatements(Precompiled(page), Precompiled(count))


_HEADER = (Job.reference_id, Job.title, Job.publish_date, Job.confidential, Job.status)
_TOTAL_AT = 1 + len(_HEADER)  # a page row: id, the header, a search's total, the place
_PLACE = (
    Location.id.label("place_id"),
    Location.name,
    Location.description,
    Location.type,
    Location.latitude,
    Location.longitude,
)


def _headers(rows: list[tuple[Any, ...]], *, place_at: int) -> list[Header]:
    """Rows of (job columns, place columns), a row per location, in order: the headers."""
    headers: list[Header] = []
    for row in rows:
        if not headers or headers[-1].id != row[0]:
            job_id, reference_id, title, published, confidential, status = row[:_TOTAL_AT]
            headers.append(Header(job_id, reference_id, title, published, confidential, status, []))
        if row[place_at] is not None:  # a job without locations has one row, of NULLs
            headers[-1].locations.append(Place(*row[place_at : place_at + len(_PLACE)]))
    return headers
