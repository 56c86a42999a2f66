"""Job operations shared by the API and the workers (C4, C5, C6). They write in the caller's
transaction and never commit. A job is read and written as plain values (`models.jobs.rows`)."""

from __future__ import annotations

import enum
import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    func,
    literal_column,
    null,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models.core import checks
from models.core.dates import default_close
from models.core.errors import (
    DuplicateReferenceId,
    FieldError,
    JobTakenDown,
    NotFound,
    ValidationFailed,
)
from models.db.entities import Employer, Job, JobLocation, Location
from models.db.fast_reads import Precompiled, planned_for_values
from models.db.feed import Position, stamp
from models.jobs import compliance, tallies, warnings
from models.jobs import rows as job_rows
from models.jobs import rules as job_rules
from models.jobs.rows import StoredJob
from models.reference.places import Place

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


def locked(
    session: Session, employer: Employer, job_id: int, *, known: StoredJob | None = None
) -> StoredJob:
    """The employer's job, locked until commit, for a write (`update`): a concurrent PUT
    waits for this one to commit and then reads its result. Merging a partial PUT into a
    copy read before another's commit could store a job that breaks a rule between fields
    that neither request broke (C4: an application email kept beside the other's switch
    to a URL route).

    `known`: the job whole as read unlocked earlier in the request (with the API key). Its
    locations and categories are the locked job's when its version is: every write of them
    raises it. A write that changes nothing then needs no more statements (C10)."""
    job = job_rows.lock(session.connection(), employer.id, job_id=job_id)
    if job is None:
        raise NotFound(f"No job has id {job_id}.")
    if known is not None and known.version == job.version and known.id == job.id:
        return _filled(job, known)
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
        raise _taken(ref)


def _taken(ref: str | None) -> DuplicateReferenceId:
    """The 409 of a used referenceId, the same whichever way it was found (a dry run's
    look-up, the write's conflict)."""
    return DuplicateReferenceId(f"This employer already has a job with referenceId {ref!r}.")


def _validated(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    job: StoredJob | None,
    today: date,
    notes: list[warnings.Warning],
) -> dict[str, Any]:
    """The changes `body` makes, or the 422 of the rules it breaks; a used referenceId is
    looked for only then, to answer 409 instead (C1). A valid body's write finds it used
    by itself (`models.jobs.rows`), and is refused with the same 409."""
    try:
        return job_rules.validate(
            session, body, employer=employer, job=job, today=today, notes=notes
        )
    except ValidationFailed:
        _check_reference_free(session, employer, body, job)
        raise


Outcome = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class Applied:
    """What a job write did, or a dry run would do (C10): the job as stored, or as it would
    be stored (id 0 for a job a dry run would create: it has none); `created`, `updated`, or
    `unchanged` when the merged job equals the stored one and nothing was written; and the
    write's warnings, in their order."""

    job: StoredJob
    outcome: Outcome
    warnings: list[warnings.Warning]


def create(session: Session, employer: Employer, body: dict[str, Any], *, today: date) -> StoredJob:
    """POST: a new job (`post`)."""
    return post(session, employer, body, today=today).job


def post(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    today: date,
    dry_run: bool = False,
) -> Applied:
    """POST: a new job; publishDate is today, status defaults to draft (C4, C5). A dry run
    answers the same errors, the used referenceId's 409 too, and writes nothing."""
    notes: list[warnings.Warning] = []
    changes = _validated(session, employer, body, job=None, today=today, notes=notes)
    new = _merged(_new(employer.id, today), changes, today=today)
    notes.extend(_comply(session, employer, new, body, None, today=today))
    if dry_run:
        _check_reference_free(session, employer, body, None)
        return _would_create(session, employer, new, notes, today=today)
    written = _insert(session, new)
    if written is None:
        raise _taken(changes.get("reference_id"))
    job, listed = written
    return _applied(employer, job, "created", notes, listed, today=today)


def _comply(
    session: Session,
    employer: Employer,
    job: StoredJob,
    body: dict[str, Any],
    stored: StoredJob | None,
    *,
    today: date,
) -> list[warnings.Warning]:
    """The C13 warnings of the merged job, or in `enforce` mode the 422 of the rules it
    breaks: after the 409 of a used referenceId, as every 422 (C1)."""
    try:
        return compliance.check(
            session.connection(),
            job,
            mode=employer.compliance,
            ontario25_plus=employer.ontario25_plus,
            today=today,
        )
    except ValidationFailed:
        _check_reference_free(session, employer, body, stored)
        raise


def _insert(session: Session, job: StoredJob) -> tuple[StoredJob, list[int]] | None:
    """The new job (`_merged` into `_new`) and the places it listed; None, and nothing
    written, when the referenceId is taken: by a concurrent request too, whose commit the
    insert waits for (PostgreSQL's ON CONFLICT)."""
    derived = _derived(job, stamp(session))
    written = job_rows.insert_job(session.connection(), job, derived)
    if written is None:
        return None
    job_id, listed = written
    return replace(job, id=job_id, updated_at=derived["updated_at"]), listed


def _would_create(
    session: Session,
    employer: Employer,
    job: StoredJob,
    notes: list[warnings.Warning],
    *,
    today: date,
) -> Applied:
    """A dry run's create: the job as the insert would store it, read nothing but which of
    its places are not listed yet."""
    assert job.locations is not None  # a create writes them
    listed = job_rows.unlisted(session.connection(), [p.id for p in job.locations])
    return _applied(employer, job, "created", notes, listed, today=today, dry_run=True)


def _applied(
    employer: Employer,
    job: StoredJob,
    outcome: Outcome,
    notes: list[warnings.Warning],
    listed: list[int],
    *,
    today: date,
    dry_run: bool = False,
) -> Applied:
    """The write's result with every warning it earns, in order (C10)."""
    found = earned(employer, job, notes, today=today)
    return Applied(job, outcome, with_listed(job, found, listed, dry_run=dry_run))


def earned(
    employer: Employer, job: StoredJob, notes: list[warnings.Warning], *, today: date
) -> list[warnings.Warning]:
    """The warnings a write of `job` earns whatever it writes, in order: its checks' and its
    state's (C10), all but `location_added`."""
    return warnings.ordered([*notes, *warnings.of_job(job, plan=employer.plan, today=today)])


def with_listed(
    job: StoredJob, found: list[warnings.Warning], listed: list[int], *, dry_run: bool = False
) -> list[warnings.Warning]:
    """`found` (in order) and the `location_added` of each of the job's places its write
    listed, in order (C10)."""
    if not listed:  # most writes: their places were listed already
        return found
    added = [
        warnings.added(f"locations[{i}]", place, dry_run=dry_run)
        for i, place in enumerate(job.locations or ())
        if place.id in listed
    ]
    return warnings.ordered([*found, *added]) if added else found


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
        language="en",
        translation_title=None,
        translation_description=None,
        ai_screening=None,
        existing_vacancy=None,
        taken_down=False,
        version=1,
        updated_at=None,
        locations=(),
        category_ids=(),
    )


def update(
    session: Session, employer: Employer, job: StoredJob, body: dict[str, Any], *, today: date
) -> StoredJob:
    """PUT: a partial update of `job` (`put`)."""
    return put(session, employer, job, body, today=today).job


def put(
    session: Session,
    employer: Employer,
    job: StoredJob,
    body: dict[str, Any],
    *,
    today: date,
    dry_run: bool = False,
) -> Applied:
    """PUT: a partial update of `job`, read locked (`locked`); the merged job must satisfy
    every rule (C4). A merged job equal to the stored one, in the stored form of every
    field, is not written: its version, updatedAt and publishDate stay (C10). A dry run
    answers the same errors, the 409 of a used referenceId too, and writes nothing."""
    planned = plan_put(session, employer, job, body, today=today, dry_run=dry_run)
    if isinstance(planned, Applied):
        return planned
    if dry_run:
        _check_reference_free(session, employer, body, job)
        merged = planned.job
        assert merged.locations is not None
        ids = [p.id for p in merged.locations] if "locations" in planned.changes else []
        listed = job_rows.unlisted(session.connection(), ids) if ids else []
        notes = planned.notes
        return _applied(employer, merged, "updated", notes, listed, today=today, dry_run=True)
    return write_update(session, employer, planned, today=today)


@dataclass(frozen=True)
class Kept:
    """What a sync run's write keeps for its item's resend (models.syncs.digests): the
    digest, and the warnings the resend answers. Every other write keeps nothing."""

    digest: str | None = None
    warnings: str | None = None


NOTHING_KEPT = Kept()


@dataclass(frozen=True)
class Change:
    """A write that passed every rule and changes its job (`plan_put`, `plan_create`): the
    job as it will be stored (whole), the job as stored (None for a create), the validated
    changes and the warnings so far. Nothing is written yet: `write_update` writes an
    update; sync runs write their creates together (models.syncs.batches)."""

    job: StoredJob
    stored: StoredJob | None
    changes: dict[str, Any]
    notes: list[warnings.Warning]


def plan_put(
    session: Session,
    employer: Employer,
    job: StoredJob,
    body: dict[str, Any],
    *,
    today: date,
    dry_run: bool = False,
) -> Applied | Change:
    """`put`'s rules, without its write: the unchanged result (C10), or the change to write.
    Reads the job's locations and categories unless `job` holds them (a sync run's batch)."""
    if job.taken_down and body.get("status") == "active":  # 409 before 422 (C1)
        raise JobTakenDown(
            f"Job {job.id} was taken down after a report; it cannot be made active again."
        )
    notes: list[warnings.Warning] = []
    changes = _validated(session, employer, body, job=job, today=today, notes=notes)
    connection = session.connection()
    merged = _merged(job, changes, today=today)
    if merged.values() == job.values():  # the row as stored: the arrays decide
        stored = job_rows.complete(connection, job)
        merged = _filled(merged, stored)
        if _items(merged) == _items(stored):
            # Unchanged, and checked all the same: in `enforce`, a job that does not comply
            # fails every update until it does (C13).
            notes.extend(_comply(session, employer, stored, body, job, today=today))
            return _applied(employer, stored, "unchanged", notes, [], today=today, dry_run=dry_run)
    else:  # changed: only the arrays it keeps are read
        merged = job_rows.complete(connection, merged)
    notes.extend(_comply(session, employer, merged, body, job, today=today))
    return Change(merged, job, changes, notes)


def write_update(
    session: Session,
    employer: Employer,
    change: Change,
    *,
    today: date,
    kept: Kept = NOTHING_KEPT,
) -> Applied:
    """Write a planned update (`plan_put`) of the job locked in this transaction."""
    merged, changes, job = change.job, change.changes, change.stored
    assert job is not None
    derived = _derived(merged, stamp(session), kept)  # after the lock, as late as it can (C10)
    try:
        listed = job_rows.update_job(
            session.connection(),
            merged,
            derived,
            locations="locations" in changes,
            categories="category_ids" in changes,
        )
    except IntegrityError:
        raise _taken(merged.reference_id) from None
    # The version as the database counted it (locked), and the change's time (C10).
    merged = replace(merged, version=job.version + 1, updated_at=derived["updated_at"])
    return _applied(employer, merged, "updated", change.notes, listed, today=today)


def plan_create(
    session: Session, employer: Employer, body: dict[str, Any], *, today: date
) -> Change:
    """A create's rules (PUT without id, no job holds the referenceId), without its write."""
    notes: list[warnings.Warning] = []
    changes = job_rules.validate(
        session, body, employer=employer, job=None, today=today, notes=notes
    )
    new = _merged(_new(employer.id, today), changes, today=today)
    notes.extend(_comply(session, employer, new, body, None, today=today))
    return Change(new, None, changes, notes)


def new_row(change: Change, kept: Kept) -> dict[str, Any]:
    """A planned create's columns (for `job_rows.insert_many`), but `updated_at`: the
    write's own stamp, taken as it writes (C10)."""
    job = change.job
    return {
        **job.values(),
        "employer_id": job.employer_id,
        "search_text": search_text(job.title, job.reference_id),
        "sync_digest": kept.digest,
        "sync_warnings": kept.warnings,
    }


def _filled(job: StoredJob, stored: StoredJob) -> StoredJob:
    """`job` with the stored arrays where it has none (the write left them as they were)."""
    return replace(
        job,
        locations=stored.locations if job.locations is None else job.locations,
        category_ids=stored.category_ids if job.category_ids is None else job.category_ids,
    )


def _items(job: StoredJob) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A job's arrays as stored: the ids of its places and categories, in order."""
    return tuple(p.id for p in job.locations or ()), tuple(job.category_ids or ())


def upsert(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    today: date,
    expect: Expect = _anything,
) -> tuple[StoredJob, bool]:
    """PUT without id (`apply`): the job, and whether it was created."""
    applied = apply(session, employer, body, today=today, expect=expect)
    return applied.job, applied.outcome == "created"


def apply(
    session: Session,
    employer: Employer,
    body: dict[str, Any],
    *,
    today: date,
    dry_run: bool = False,
    expect: Expect = _anything,
) -> Applied:
    """PUT without id: update the job with this referenceId, or create it (C4). The one
    entry point of such a write, for the API and for sync runs' items (C11).

    Idempotent, and safe when several requests create one new referenceId at once: the
    losers update the winner's job. `expect` is asked of the job as locked, or of None
    before a create, ahead of 409 and 422 (C10). A dry run answers the same errors and
    writes nothing, in the caller's transaction as in any other (C10).
    """
    ref = _required_reference(session, employer, body, today=today)
    connection = session.connection()
    job = job_rows.lock(connection, employer.id, reference_id=ref)
    expect(job)
    if job is not None:
        return put(session, employer, job, body, today=today, dry_run=dry_run)
    change = plan_create(session, employer, body, today=today)
    if dry_run:
        return _would_create(session, employer, change.job, change.notes, today=today)
    written = _insert(session, change.job)
    if written is not None:
        job, listed = written
        return _applied(employer, job, "created", change.notes, listed, today=today)
    job = job_rows.lock(connection, employer.id, reference_id=ref)
    if job is None:  # the winner was deleted meanwhile: nothing sensible but to retry
        raise DuplicateReferenceId("The referenceId is being changed; retry the request.")
    expect(job)  # If-None-Match: * loses to the concurrent create
    return put(session, employer, job, body, today=today)


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


def _derived(job: StoredJob, at: datetime, kept: Kept = NOTHING_KEPT) -> dict[str, Any]:
    """What a write stores beside the job's values: its search text (C6), when (C10), and
    what it keeps for a resend (C11)."""
    return {
        "search_text": search_text(job.title, job.reference_id),
        "updated_at": at,
        "sync_digest": kept.digest,
        "sync_warnings": kept.warnings,
    }


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
    updated_at: datetime
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
    totals: tallies.SearchTotals | None = None,
    updated_since: datetime | None = None,
) -> Page:
    """The employer's jobs, newest publishDate first, then id (stable across pages, C6).

    `q` is a case-insensitive substring of title or referenceId, its `%` and `_` literal.
    Without it, the page comes with its total, read from the employer's tallies (migration
    0007), in one statement. A search's total is counted; `totals`, when given, keeps it
    for the next search of the same words until the employer's jobs change.
    `updated_since` keeps the jobs changed at or after it (C10); their total is counted
    every time, since neither the tallies nor a kept total know when jobs changed."""
    folded = fold(q) if q else ""
    params = {
        "employer_id": employer_id,
        "q": folded,
        "pattern": like_pattern(folded),
        "status": status,
        "limit": page_size,
        "offset": (page - 1) * page_size,
        "since": updated_since,
    }
    if updated_since is not None:
        return _since(connection, params, folded, status)
    if not folded:
        statement = _list_statement(_Kind.PLAIN, False, bool(status), _first(page, page_size))
        rows = statement.all(connection, params)
        return Page(_headers(rows), int(rows[0][_JOBS]))
    grams = len(folded) >= GRAM and connection.dialect.name == "postgresql"
    kept = totals if totals is not None else tallies.SearchTotals(0)
    search = _Search(connection, params, grams, _first(page, page_size), kept)
    return search.page(employer_id, status, folded)


def like_pattern(folded: str) -> str:
    """A folded `q` as a LIKE pattern whose `%` and `_` are literal (escaped with `/`)."""
    return folded.replace("/", "//").replace("%", "/%").replace("_", "/_")


def _since(connection: Connection, params: dict[str, Any], q: str, status: str | None) -> Page:
    """A page of the jobs changed since an instant, with its total counted (C10)."""
    grams = len(q) >= GRAM and connection.dialect.name == "postgresql"
    kinds = {"grams": grams, "status": bool(status), "since": True, "search": bool(q)}
    with planned_for_values(connection):
        rows = _list_statement(_Kind.MATCHES, **kinds).all(connection, params)
        found = _headers(rows)
        if found:
            return Page(found, int(rows[0][_MATCHES]))
        (row,) = _list_statement(_Kind.COUNT, **kinds).all(connection, params)
        return Page(found, int(row[_MATCHES]))


@dataclass(frozen=True)
class Changes:
    jobs: list[Header]
    resume: Position  # where the next page starts: after the last job, or where this started


def changes(
    connection: Connection,
    employer_id: int,
    *,
    after: Position,
    until: datetime,
    q: str | None,
    status: str | None,
    limit: int,
) -> Changes:
    """The change feed (C10): the employer's jobs changed after `after`, by (updatedAt, id)
    ascending, up to `until` (the present less the lag: no transaction still open can commit
    a change stamped before it), at most `limit`. A job changed again later comes again."""
    folded = fold(q) if q else ""
    params = {
        "employer_id": employer_id,
        "pattern": like_pattern(folded),
        "status": status,
        "at": after.at,
        "after_id": after.id,
        "until": until,
        "limit": limit,
    }
    rows = _feed_statement(bool(status), bool(folded)).all(connection, params)
    found = _headers(rows)
    resume = Position(rows[-1][_FEED_AT], found[-1].id) if found else after
    return Changes(found, resume)


class _Kind(enum.Enum):
    """The statements of a list: each answers the employer's tally (its jobs of the status
    and its changes) with the page's rows, a row with no job when the page is empty."""

    PLAIN = enum.auto()  # no q: the employer's jobs in order
    WALK = enum.auto()  # q: the jobs in order, each tested, up to `window` of them
    MATCHES = enum.auto()  # q: every match (by the gram index on PostgreSQL), sorted, counted
    COUNT = enum.auto()  # q: the matches counted, with the tally, and no page


@dataclass
class _Search:
    """A search's page and exact total, by the cheaper of two readings, which the total
    counted before tells apart. Walking the employer's jobs newest first, testing each,
    finds a page of a common word after a few hundred jobs (it reads page × jobs / matches);
    a rare word would have it read them all, where its matches alone are few to read."""

    connection: Connection
    params: dict[str, Any]
    grams: bool
    first: int | None  # the page size, on the first page (`_first`)
    totals: tallies.SearchTotals

    def page(self, employer_id: int, status: str | None, q: str) -> Page:
        kept = self.totals.get(employer_id, status, q)
        reach = kept.reach if kept is not None else 1
        offset, limit = self.params["offset"], self.params["limit"]
        if kept is not None and (window := _window(kept, offset + limit)):
            rows = self._run(_Kind.WALK, status, window=window)
            found = _headers(rows)
            changes = int(rows[0][_CHANGES])
            total = kept.total if kept.changes == changes else None
            if len(found) == (limit if total is None else min(limit, max(total - offset, 0))):
                if total is None:  # the jobs changed since: count again
                    total = self._count(employer_id, status, q, reach)
                return Page(found, total)
            # Fewer matches than the page holds: they bunch up further back (or the jobs
            # changed), so the next walk of this search goes twice as far.
            reach *= 2
        rows = self._run(_Kind.MATCHES, status)
        found = _headers(rows)
        changes = int(rows[0][_CHANGES])
        if found:
            total = int(rows[0][_MATCHES])
            self.totals.put(employer_id, status, q, _counted(rows[0], total, reach))
        elif kept is not None and kept.changes == changes:
            total = kept.total  # past the last page, and nothing changed
        else:
            total = self._count(employer_id, status, q, reach)
        return Page(found, total)

    def _count(self, employer_id: int, status: str | None, q: str, reach: int) -> int:
        (row,) = self._run(_Kind.COUNT, status)
        total = int(row[_MATCHES])
        self.totals.put(employer_id, status, q, _counted(row, total, reach))
        return total

    def _run(self, kind: _Kind, status: str | None, **more: Any) -> list[tuple[Any, ...]]:
        """Run a statement of the search. Those reading every match are planned for their
        values each time: how to find them depends on the employer and the words. A walk,
        like a plain page, reads the employer's index in order whoever the employer is, so
        psycopg may prepare it, and PostgreSQL keep its plan."""
        if kind is _Kind.WALK:
            statement = _list_statement(kind, self.grams, bool(status), self.first)
            return statement.all(self.connection, self.params | more)
        statement = _list_statement(kind, self.grams, bool(status))
        with planned_for_values(self.connection):
            return statement.all(self.connection, self.params | more)


def _counted(row: tuple[Any, ...], total: int, reach: int) -> tallies.Counted:
    return tallies.Counted(int(row[_CHANGES]), total, int(row[_JOBS]), reach)


WALK_MARGIN = 2  # matches may bunch up: read up to twice the expected jobs, and a few more
# A match read from the gram index, with its row, then sorted costs about as much as ten jobs
# tested in the employer's index (measured: 1.4 to 4 µs against 0.1 to 0.25 µs).
WALK_CHEAPER = 8


def _window(kept: tallies.Counted, end: int) -> int | None:
    """How many of the employer's jobs to walk for the page ending at match `end`, when
    walking is cheaper than reading every match (as last counted); else None. Should the
    walk come up short, reading the matches after it costs at most about twice reading
    them alone."""
    if kept.total <= 0:
        return None
    expected = -(-end * kept.jobs * kept.reach // kept.total)
    if expected >= WALK_CHEAPER * kept.total:
        return None
    return WALK_MARGIN * expected + 100


def _first(page: int, page_size: int) -> int | None:
    """The page size, for the first page: its statements hold it as a constant."""
    return page_size if page == 1 else None


@functools.lru_cache(maxsize=256)
def _list_statement(
    kind: _Kind,
    grams: bool,
    status: bool,
    first: int | None = None,
    *,
    since: bool = False,
    search: bool = True,
) -> Precompiled:
    """One kind of list statement, built and compiled once: a list is read far more often
    than written, and building statements for each cost more than the database's answer.

    `first`: a statement of the first page of that many jobs, holding its LIMIT in the SQL.
    PostgreSQL plans a prepared statement anew for each run while the plan it would keep
    seems dearer, and with its LIMIT a parameter it assumes a tenth of the employer's jobs
    are read: planning then cost the first page, the page most read, three times its run.

    The page's jobs are chosen first, by id from the employer's index (deep pages stay
    cheap), then joined to their header columns and locations; the tally is one row that
    the page joins, so an empty page still answers it.

    `since`: only jobs changed at or after the parameter `since` (C10); `search`: whether
    `q` filters (a list filtered by `since` alone counts its matches too)."""
    employer = bindparam("employer_id", type_=Integer)
    status_value = bindparam("status", type_=String) if status else None
    tally = tallies.of_employer(employer, status_value)
    where = [Job.employer_id == employer]
    if status_value is not None:
        where.append(Job.status == status_value)
    if since:
        where.append(Job.updated_at >= bindparam("since", type_=Job.updated_at.type))
    matches: Any = Job.search_text.contains(bindparam("pattern", type_=Text), escape="/")
    if not search:
        matches = true()
    elif grams:
        wanted = search_grams(employer, bindparam("q", type_=Text))
        matches = and_(matches, search_grams(Job.employer_id, Job.search_text).contains(wanted))
    if kind is _Kind.COUNT:
        counted = select(func.count()).where(*where, matches).scalar_subquery()
        return Precompiled(select(tally.c.jobs, tally.c.changes, counted.label("matches")))
    order = (Job.publish_date.desc(), Job.id.desc())
    if kind is _Kind.WALK:
        walked = select(Job.id, Job.publish_date, Job.search_text).where(*where).order_by(*order)
        # OFFSET 0 written out: SQLite's compiler adds one to a LIMIT, as a parameter.
        walked = walked.limit(bindparam("window", type_=Integer)).offset(tallies.ZERO)
        window = walked.subquery("walked")
        ids = select(window.c.id, null().label("matches")).where(
            window.c.search_text.contains(bindparam("pattern", type_=Text), escape="/")
        )
        ids = ids.order_by(window.c.publish_date.desc(), window.c.id.desc())
    elif kind is _Kind.MATCHES:
        ids = select(Job.id, func.count().over().label("matches")).where(*where, matches)
        ids = ids.order_by(*order)
    else:
        ids = select(Job.id, null().label("matches")).where(*where).order_by(*order)
    if first is None:
        ids = ids.limit(bindparam("limit", type_=Integer))
        ids = ids.offset(bindparam("offset", type_=BigInteger))  # pages run to 2**31 - 1
    else:
        ids = ids.limit(literal_column(str(int(first)))).offset(tallies.ZERO)
    chosen = ids.subquery("chosen")
    page = (
        select(chosen.c.matches, Job.id, *_HEADER, JobLocation.position, *_PLACE)
        .select_from(chosen)
        .join(Job, Job.id == chosen.c.id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .subquery("page")
    )
    columns = [page.c.id, *(page.c[c.key] for c in _HEADER), *(page.c[c.key] for c in _PLACE)]
    statement = (
        select(tally.c.jobs, tally.c.changes, page.c.matches, *columns)
        .select_from(tally.outerjoin(page, true()))
        .order_by(page.c.publish_date.desc(), page.c.id.desc(), page.c.position)
    )
    return Precompiled(statement)


@functools.lru_cache(maxsize=8)
def _feed_statement(status: bool, search: bool) -> Precompiled:
    """The change feed's page (C10): the ids from the employer's (updated_at, id) index
    (migration 0009), after the position and not after `until`, then their headers and
    locations. Its rows are laid out as the list's, the tally's columns empty."""
    at = bindparam("at", type_=Job.updated_at.type)
    where = [
        Job.employer_id == bindparam("employer_id", type_=Integer),
        tuple_(Job.updated_at, Job.id) > tuple_(at, bindparam("after_id", type_=Integer)),
        Job.updated_at <= bindparam("until", type_=Job.updated_at.type),
    ]
    if status:
        where.append(Job.status == bindparam("status", type_=String))
    if search:
        where.append(Job.search_text.contains(bindparam("pattern", type_=Text), escape="/"))
    ids = select(Job.id).where(*where).order_by(Job.updated_at, Job.id)
    chosen = ids.limit(bindparam("limit", type_=Integer)).subquery("chosen")
    empty = (null(), null(), null())  # the list's tally and matches
    statement: Any = (
        select(*empty, Job.id, *_HEADER, *_PLACE)
        .select_from(chosen)
        .join(Job, Job.id == chosen.c.id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .order_by(Job.updated_at, Job.id, JobLocation.position)
    )
    return Precompiled(statement)


_HEADER = (
    Job.reference_id,
    Job.title,
    Job.publish_date,
    Job.confidential,
    Job.status,
    Job.updated_at,
)
_PLACE = (
    Location.id.label("place_id"),
    Location.name,
    Location.description,
    Location.type,
    Location.latitude,
    Location.longitude,
)
# A list row: the employer's jobs (of the status) and changes, a search's matches, then the
# job's id and header, then one of its places.
_JOBS, _CHANGES, _MATCHES, _ID = 0, 1, 2, 3
_PLACE_AT = _ID + 1 + len(_HEADER)
_FEED_AT = _PLACE_AT - 1  # a row's updated_at: the last of the header


def _headers(rows: list[tuple[Any, ...]]) -> list[Header]:
    """Rows of (job columns, place columns), a row per location, in order: the headers."""
    headers: list[Header] = []
    for row in rows:
        if row[_ID] is None:  # the row of an empty page, for its tally
            continue
        if not headers or headers[-1].id != row[_ID]:
            job_id, reference_id, title, published, confidential, status, updated = row[
                _ID:_PLACE_AT
            ]
            headers.append(
                Header(job_id, reference_id, title, published, confidential, status, updated, [])
            )
        if row[_PLACE_AT] is not None:  # a job without locations has one row, of NULLs
            headers[-1].locations.append(Place(*row[_PLACE_AT : _PLACE_AT + len(_PLACE)]))
    return headers
