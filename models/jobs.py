"""Job operations shared by the API and the workers (C4, C5, C6). They flush, never commit."""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, Connection, Integer, String, Text, bindparam, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from models import checks, job_rules
from models.dates import default_close, utcnow
from models.entities import Employer, Job, JobCategory, JobLocation, Location
from models.errors import DuplicateReferenceId, FieldError, NotFound, ValidationFailed
from models.fast_reads import Precompiled, planned_for_values


def get(session: Session, employer: Employer, job_id: int, *, for_update: bool = False) -> Job:
    """The employer's job; another employer's job is as absent as a missing one (C1).

    `for_update` (a write follows): the row is locked first, so a concurrent PUT waits for
    this one to commit and then reads its result. Merging a partial PUT into a copy read
    before another's commit could store a job that breaks a rule between fields that neither
    request broke (C4: an application email kept beside the other's switch to a URL route).
    The lock is its own statement: read after it, the job and its locations and categories
    are all as committed."""
    if for_update:
        _lock(session, Job.id == job_id, Job.employer_id == employer.id)
    query = (
        select(Job)
        .where(Job.id == job_id, Job.employer_id == employer.id)
        .options(  # one round trip for the whole read shape
            joinedload(Job.job_locations).joinedload(JobLocation.location),
            joinedload(Job.job_categories).joinedload(JobCategory.category),
        )
    )
    job = session.scalars(query).unique().first()
    if job is None:
        raise NotFound(f"No job has id {job_id}.")
    return job


def find_by_reference(
    session: Session, employer: Employer, reference_id: str, *, for_update: bool = False
) -> Job | None:
    """The employer's job with this referenceId; `for_update` locks it first, as `get`."""
    where = (Job.employer_id == employer.id, Job.reference_id == reference_id)
    if for_update:
        _lock(session, *where)
    query = select(Job).where(*where).execution_options(populate_existing=for_update)
    return session.scalar(query)


def _lock(session: Session, *where: Any) -> None:
    """Lock the matching job row until commit (PostgreSQL; SQLite writers hold the whole
    database from their first statement, `BEGIN IMMEDIATE`)."""
    if session.get_bind().dialect.name != "sqlite":
        session.execute(select(Job.id).where(*where).with_for_update())


def _check_reference_free(
    session: Session, employer: Employer, body: dict[str, Any], job: Job | None = None
) -> None:
    """409 before 422 (C1): a used referenceId is refused before the other rules are read."""
    try:
        ref = checks.string(body.get("referenceId"), "referenceId", max_len=50)
    except checks.Invalid:
        return  # absent, or reported with the other rules (a NUL never reaches the database)
    if job and job.reference_id == ref:
        return
    if find_by_reference(session, employer, ref) is not None:
        raise DuplicateReferenceId(f"This employer already has a job with referenceId {ref!r}.")


def create(session: Session, employer: Employer, body: dict[str, Any], *, today: date) -> Job:
    """POST: a new job; publishDate is today, status defaults to draft (C4, C5)."""
    _check_reference_free(session, employer, body)
    changes = job_rules.validate(session, body, employer=employer, job=None, today=today)
    job = _insert(session, employer, changes, today=today)
    if job is None:
        raise DuplicateReferenceId("This employer already has a job with that referenceId.")
    return job


def _insert(
    session: Session, employer: Employer, changes: dict[str, Any], *, today: date
) -> Job | None:
    """Insert in a savepoint; None when a concurrent request took the referenceId first."""
    job = Job(
        employer=employer,
        publish_date=today,
        status="draft",
        confidential=False,
        auto_refresh=False,
        salary_commission=False,
    )
    _apply(job, changes, today=today)
    try:
        with session.begin_nested():
            session.add(job)
            session.flush()
    except IntegrityError:
        return None
    return job


def update(
    session: Session, employer: Employer, job: Job, body: dict[str, Any], *, today: date
) -> Job:
    """PUT: a partial update; the merged job must satisfy every rule (C4)."""
    _check_reference_free(session, employer, body, job)
    changes = job_rules.validate(session, body, employer=employer, job=job, today=today)
    _apply(job, changes, today=today)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise DuplicateReferenceId(
            "This employer already has a job with that referenceId."
        ) from None
    return job


def upsert(
    session: Session, employer: Employer, body: dict[str, Any], *, today: date
) -> tuple[Job, bool]:
    """PUT without id: update the job with this referenceId, or create it (C4).

    Returns the job and whether it was created. Idempotent, and safe when several requests
    create one new referenceId at once: the losers update the winner's job.
    """
    ref = _required_reference(session, employer, body, today=today)
    job = find_by_reference(session, employer, ref, for_update=True)
    if job is not None:
        return update(session, employer, job, body, today=today), False
    changes = job_rules.validate(session, body, employer=employer, job=None, today=today)
    created = _insert(session, employer, changes, today=today)
    if created is not None:
        return created, True
    job = find_by_reference(session, employer, ref, for_update=True)
    if job is None:  # the winner was deleted meanwhile: nothing sensible but to retry
        raise DuplicateReferenceId("The referenceId is being changed; retry the request.")
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


def _apply(job: Job, changes: dict[str, Any], *, today: date) -> None:
    """Write validated changes; entering active (re-)publishes the job (C5)."""
    locations = changes.pop("locations", None)
    categories = changes.pop("categories", None)
    close_written = "close_date" in changes
    republish = changes.get("status") == "active" and job.status != "active"
    for name, value in changes.items():
        setattr(job, name, value)
    if locations is not None:
        for location in locations:
            location.listed = True  # a gazetteer place written in a job joins the list (C3)
        job.job_locations = [
            JobLocation(position=i, location=loc) for i, loc in enumerate(locations)
        ]
    if categories is not None:
        job.job_categories = [JobCategory(position=i, category=c) for i, c in enumerate(categories)]
    if republish:
        job.publish_date = today
        if not close_written and job.close_date is not None and job.close_date < today:
            job.close_date = default_close(today)
    if job.close_date is None:
        job.close_date = default_close(job.publish_date)
    job.search_text = search_text(job.title, job.reference_id)
    touch(job)


def touch(job: Job) -> None:
    """Mark a write: updated_at, and version + 1 counted by the database (two concurrent
    writers of one row get two versions, never one version for two contents)."""
    job.updated_at = utcnow()
    if job.id is not None:
        job.version = Job.version + 1


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


def delete(session: Session, job: Job) -> None:
    session.delete(job)
    session.flush()


def delete_by_id(session: Session, employer: Employer, job_id: int) -> None:
    """DELETE /jobs/{id}: 404 when unknown. The job is found locked (`get`), as by a PUT:
    a DELETE that read it unlocked went on to delete it after a concurrent DELETE had, and
    answered 204 twice for one job (C4: the second is a 404)."""
    delete(session, get(session, employer, job_id, for_update=True))


def delete_by_reference(session: Session, employer: Employer, body: dict[str, Any]) -> None:
    """DELETE /jobs with {"referenceId": …}: 404 when unknown; the referenceId is then free."""
    try:
        ref = checks.string(body.get("referenceId"), "referenceId", max_len=50)
    except checks.Invalid as e:
        field = e.error
        if body.get("referenceId") in (None, ""):
            field = FieldError("referenceId", "required", "referenceId is required.")
        raise ValidationFailed([field], subject="request") from None
    # Locked: a PUT changing this job's referenceId is waited for, and the job is then no
    # longer found by the old one (unlocked, the renamed job was deleted: a DELETE answered
    # 204 for a referenceId the PUT's 200 had already given up, and took the job with it).
    job = find_by_reference(session, employer, ref, for_update=True)
    if job is None:
        raise NotFound(f"No job has referenceId {ref!r}.")
    delete(session, job)


GRAM = 3  # characters in a search gram (migration 0003)


def search_grams(employer_id: Any, content: Any) -> Any:
    """The grams the search index keeps of a job's (employer_id, search_text), or asks of a
    search's (employer id, q): PostgreSQL's `jobpost_search_grams` (migration 0003)."""
    return func.jobpost_search_grams(employer_id, content, type_=postgresql.ARRAY(Text))


class Place(NamedTuple):
    """A job's location as the list shows it."""

    id: int
    name: str
    description: str
    type: str
    latitude: float | None
    longitude: float | None


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
