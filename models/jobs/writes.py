"""Job operations shared by the API and the workers (C4, C5, C6). They write in the caller's
transaction and never commit. A job is read and written as plain values (`models.jobs.rows`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Literal

from sqlalchemy import (
    Connection,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models.applications import bounces
from models.core import checks
from models.core.dates import default_close
from models.core.errors import (
    DuplicateReferenceId,
    FieldError,
    JobTakenDown,
    NotFound,
    ValidationFailed,
)
from models.db.entities import Employer
from models.db.feed import stamp
from models.jobs import compliance, tombstones, warnings, workplace
from models.jobs import events as job_events
from models.jobs import rows as job_rows
from models.jobs import rules as job_rules
from models.jobs.rows import StoredJob
from models.jobs.search import search_text
from models.notifications import queue as notifications

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
        return _with_stored_arrays(job, known)
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
        raise _reference_taken(ref)


def _reference_taken(ref: str | None) -> DuplicateReferenceId:
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
    # A dry run's update: the job as stored, whole, which its answer's `changes` compare
    # `job` with (C10). None otherwise.
    stored: StoredJob | None = None
    # The webhook messages the write emitted (C12), for the caller to enqueue after commit.
    messages: tuple[str, ...] = ()


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
    new = _merged(_blank_job(employer.id, today), changes, today=today)
    notes.extend(_compliance_warnings(session, employer, new, body, None, today=today))
    if dry_run:
        _check_reference_free(session, employer, body, None)
        return _would_create(session, employer, new, notes, today=today)
    written = _insert(session, new)
    if written is None:
        raise _reference_taken(changes.get("reference_id"))
    job, listed = written
    return _announced(
        session, employer, _applied(employer, job, "created", notes, listed, today=today)
    )


def _announced(
    session: Session,
    employer: Employer,
    applied: Applied,
    stored: StoredJob | None = None,
    ears: frozenset[str] | None = None,
) -> Applied:
    """`applied` with its `job.created` or `job.updated` emitted (C12): an update's with the
    job as `stored` (whole) before it."""
    job = applied.job
    assert job.updated_at is not None
    if applied.outcome == "created":
        ids = job_events.written(
            session, employer.id, employer.name, created=[job], now=job.updated_at, ears=ears
        )
    else:
        assert stored is not None
        pair = [(stored, job)]
        ids = job_events.written(
            session, employer.id, employer.name, updated=pair, now=job.updated_at, ears=ears
        )
    return replace(applied, messages=tuple(ids)) if ids else applied


def _compliance_warnings(
    session: Session,
    employer: Employer,
    job: StoredJob,
    body: dict[str, Any],
    stored: StoredJob | None,
    *,
    today: date,
) -> list[warnings.Warning]:
    """The C13 warnings of the merged job, or in `enforce` mode the 422 of the rules it
    breaks: after the 409 of a used referenceId, as every 422 (C1); and C22's, when its
    applicationEmail is flagged."""
    try:
        found = compliance.check(
            session.connection(),
            job,
            mode=employer.compliance,
            ontario25_plus=employer.ontario25_plus,
            today=today,
        )
    except ValidationFailed:
        _check_reference_free(session, employer, body, stored)
        raise
    address = job.application_email
    if address is not None and bounces.is_flagged(session, employer.id, address):
        found.append(warnings.undeliverable(address))
    return found


def _insert(session: Session, job: StoredJob) -> tuple[StoredJob, list[int]] | None:
    """The new job (`_merged` into `_blank_job`) and the places it listed; None, and nothing
    written, when the referenceId is taken: by a concurrent request too, whose commit the
    insert waits for (PostgreSQL's ON CONFLICT)."""
    derived = _derived(job, stamp(session))
    written = job_rows.insert_job(session.connection(), job, derived)
    if written is None:
        return None
    job_id, listed = written
    notifications.job_written(session, job_id, was_public=False, is_public=_public(job))  # C18
    return replace(job, id=job_id, updated_at=derived["updated_at"]), listed


def _public(job: StoredJob) -> bool:
    """Whether the job's pages are public (C15): active, and not taken down."""
    return job.status == "active" and not job.taken_down


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
    found = write_warnings(employer, job, notes, today=today)
    return Applied(job, outcome, with_location_added(job, found, listed, dry_run=dry_run))


def write_warnings(
    employer: Employer, job: StoredJob, notes: list[warnings.Warning], *, today: date
) -> list[warnings.Warning]:
    """The warnings a write of `job` earns whatever it writes, in order: its checks' and its
    state's (C10), all but `location_added`."""
    return warnings.ordered([*notes, *warnings.of_job(job, plan=employer.plan, today=today)])


def with_location_added(
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


def _blank_job(employer_id: int, today: date) -> StoredJob:
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
        workplace_type=workplace.DEFAULT_TYPE,
        applicant_locations="",
        taken_down=False,
        questions=None,
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
    whole: bool = False,
) -> Applied:
    """PUT: a partial update of `job`, read locked (`locked`); the merged job must satisfy
    every rule (C4). A merged job equal to the stored one, in the stored form of every
    field, is not written: its version, updatedAt and publishDate stay (C10). A dry run
    answers the same errors, the 409 of a used referenceId too, and writes nothing. An
    update's `stored` is the job before it, whole, when `whole` asks it (a sync item's
    `changes`, C11) or its `job.updated` needs it (C12)."""
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
        trial = _applied(employer, merged, "updated", notes, listed, today=today, dry_run=True)
        return replace(trial, stored=_whole(session.connection(), job, merged, planned.changes))
    # Who hears the update, asked before it writes: the job's arrays as stored are read then.
    ears = job_events.heard(session, employer.id)
    stored = job
    if whole or "job.updated" in ears:
        stored = _whole(session.connection(), job, planned.job, planned.changes)
    applied = write_update(session, employer, planned, today=today)
    announced = _announced(session, employer, applied, stored, ears)
    return replace(announced, stored=stored) if whole else announced


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
        merged = _with_stored_arrays(merged, stored)
        if _array_ids(merged) == _array_ids(stored):
            # Unchanged, and checked all the same: in `enforce`, a job that does not comply
            # fails every update until it does (C13).
            notes.extend(_compliance_warnings(session, employer, stored, body, job, today=today))
            return _applied(employer, stored, "unchanged", notes, [], today=today, dry_run=dry_run)
    else:  # changed: only the arrays it keeps are read
        merged = job_rows.complete(connection, merged)
    notes.extend(_compliance_warnings(session, employer, merged, body, job, today=today))
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
        raise _reference_taken(merged.reference_id) from None
    notifications.job_written(  # C18: API writes and sync runs' updates alike
        session, job.id, was_public=_public(job), is_public=_public(merged)
    )
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
    new = _merged(_blank_job(employer.id, today), changes, today=today)
    notes.extend(_compliance_warnings(session, employer, new, body, None, today=today))
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


def _whole(
    connection: Connection, job: StoredJob, merged: StoredJob, changes: dict[str, Any]
) -> StoredJob:
    """The stored `job` with its arrays: read only when the change replaces one the lock
    did not read; an array the change keeps is the merged job's."""
    if job.locations is None and "locations" in changes:
        return job_rows.complete(connection, job)
    if job.category_ids is None and "category_ids" in changes:
        return job_rows.complete(connection, job)
    return _with_stored_arrays(job, merged)


def _with_stored_arrays(job: StoredJob, stored: StoredJob) -> StoredJob:
    """`job` with the stored arrays where it has none (the write left them as they were)."""
    return replace(
        job,
        locations=stored.locations if job.locations is None else job.locations,
        category_ids=stored.category_ids if job.category_ids is None else job.category_ids,
    )


def _array_ids(job: StoredJob) -> tuple[tuple[int, ...], tuple[int, ...]]:
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
    whole: bool = False,
) -> Applied:
    """PUT without id: update the job with this referenceId, or create it (C4). The one
    entry point of such a write, for the API and for sync runs' items (C11); `whole` as
    `put`'s.

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
        return put(session, employer, job, body, today=today, dry_run=dry_run, whole=whole)
    change = plan_create(session, employer, body, today=today)
    if dry_run:
        return _would_create(session, employer, change.job, change.notes, today=today)
    written = _insert(session, change.job)
    if written is not None:
        job, listed = written
        applied = _applied(employer, job, "created", change.notes, listed, today=today)
        return _announced(session, employer, applied)
    job = job_rows.lock(connection, employer.id, reference_id=ref)
    if job is None:  # the winner was deleted meanwhile: nothing sensible but to retry
        raise DuplicateReferenceId("The referenceId is being changed; retry the request.")
    expect(job)  # If-None-Match: * loses to the concurrent create
    return put(session, employer, job, body, today=today, whole=whole)


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


def delete_by_id(
    session: Session, employer: Employer, job_id: int, *, expect: Expect | None = None
) -> list[str]:
    """DELETE /jobs/{id}: 404 when unknown. One statement, which waits for a write of the
    job in flight: of two DELETEs at once, the second finds the job gone (C4: a 404, where
    reading it unlocked first answered 204 twice for one job); then the job's tombstone for
    the change feed (C10). With `expect` (C10), the job is locked and `expect` asked of it
    first. Returns the `job.deleted` messages (C12)."""
    if expect is not None:
        expect(locked(session, employer, job_id))
    gone = job_rows.delete_job(session.connection(), employer.id, job_id=job_id)
    if gone is None:
        raise NotFound(f"No job has id {job_id}.")
    deleted = tombstones.record(session, employer.id, gone[0], gone[2])
    notifications.job_written(session, job_id, was_public=gone[1] == "active", is_public=False)
    return job_events.written(
        session, employer.id, employer.name, deleted=[deleted], now=deleted.deleted_at
    )


def delete_by_reference(
    session: Session, employer: Employer, body: dict[str, Any], *, expect: Expect | None = None
) -> list[str]:
    """DELETE /jobs with {"referenceId": …}: 404 when unknown; the referenceId is then free.
    With `expect` (C10), the job is locked and `expect` asked of it first. Returns the
    `job.deleted` messages (C12)."""
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
    gone = job_rows.delete_job(session.connection(), employer.id, reference_id=ref)
    if gone is None:
        raise NotFound(f"No job has referenceId {ref!r}.")
    deleted = tombstones.record(session, employer.id, gone[0], gone[2])
    notifications.job_written(session, gone[0], was_public=gone[1] == "active", is_public=False)
    return job_events.written(
        session, employer.id, employer.name, deleted=[deleted], now=deleted.deleted_at
    )
