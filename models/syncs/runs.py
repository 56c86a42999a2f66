"""Sync runs (C11): the employer's jobs sent at once, kept as items, applied by the workers.

The API checks only a run's outer shape and stores the run and its items in one transaction
(`start`, `add`); the worker (workers.syncing) claims the run under a lease and applies its
items one transaction each (`apply_item`), then archives what a snapshot left out, once
(`finish`). Every transition of a run is a conditional UPDATE naming the claim it expects,
so a worker whose lease ran out can no longer commit anything (C11: never twice).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

import orjson
from sqlalchemy import (
    Connection,
    Row,
    Table,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from models.core import checks
from models.core.errors import DomainError, FieldError, NotFound, ValidationFailed
from models.db.entities import Employer, Job, SyncItem, SyncRun
from models.jobs import writes as jobs
from models.webhooks import endpoints as webhooks

RUNS = cast(Table, SyncRun.__table__)
ITEMS = cast(Table, SyncItem.__table__)
JOBS = cast(Table, Job.__table__)

MODES = ("upsert", "snapshot")
STATUSES = ("open", "queued", "running", "completed", "cancelled")
OUTCOMES = ("pending", "created", "updated", "unchanged", "archived", "failed")
IN_PROGRESS = ("open", "queued", "running")
PER_REQUEST = 10_000  # items in one request (C11)
PER_RUN = 1_000_000  # items in one open run (C11)
OPEN_FOR = timedelta(hours=24)  # an open run not started by then is cancelled (C11)
KILLS = 3  # an item whose processing ended its worker this often fails (C11)
MAX_REFERENCE = 50
_CHUNK = 500  # bound values per IN (...) list: well under SQLite's limit


class SyncInProgress(DomainError):
    code = "sync_in_progress"


class SyncNotOpen(DomainError):
    code = "sync_not_open"


# --- intake: the outer shape --------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """What a request to start (or add to) a run says, its items as JSON text in order."""

    mode: str
    open: bool
    allow_empty: bool
    dry_run: bool
    items: list[tuple[str, Any]]  # (referenceId, the item: a dict, or its JSON text)


def _flag(body: dict[str, Any], name: str, errors: list[FieldError]) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        errors.append(FieldError(name, "invalid_type", f"{name} must be true or false."))
        return False
    return value


def _decimal(value: Any) -> Any:
    """Numbers were read as Decimal (C4): written back as the same literal."""
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError


def item_text(item: dict[str, Any]) -> str:
    """An item as JSON text that reads back (`read_item`) to the same values. (As a str: the
    bytes orjson answers keep the whole buffer it wrote them in.)"""
    try:
        return orjson.dumps(item, default=_decimal).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which orjson cannot write
        return orjson.dumps(_big_ints(item), default=_decimal).decode()


def _big_ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _big_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_big_ints(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return orjson.Fragment(str(value))
    return value


@dataclass(frozen=True, slots=True)
class Packed:
    """An item as the request's parse keeps it (api.body.parse_json_streamed): its
    referenceId as sent, and its JSON text; its values are not kept (a 50 MiB body)."""

    reference: Any
    text: str


def pack(value: Any) -> Any:
    """An element of `jobs`, packed when it is an item; anything else is kept only by type
    (its one use is the error naming it)."""
    if isinstance(value, dict):
        return Packed(value.get("referenceId"), item_text(value))
    return [] if isinstance(value, list) else value


def read_item(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text, parse_float=Decimal)
    return value


def _items(jobs_value: Any, prefix: str, errors: list[FieldError]) -> list[tuple[str, Any]]:
    """The items with their referenceIds, or errors on them (C11); `jobs` is a list."""
    seen: set[str] = set()
    items: list[tuple[str, Any]] = []
    for i, item in enumerate(jobs_value):
        where = f"{prefix}[{i}]"
        if isinstance(item, Packed):
            ref, item = item.reference, item.text
        elif isinstance(item, dict):
            ref = item.get("referenceId")
        else:
            errors.append(FieldError(where, "invalid_type", "Each job must be a JSON object."))
            continue
        field = f"{where}.referenceId"
        if ref is None:
            errors.append(FieldError(field, "required", "Each job needs a referenceId."))
        elif not isinstance(ref, str):
            errors.append(FieldError(field, "invalid_type", "referenceId must be a string."))
        elif ref == "":
            errors.append(FieldError(field, "too_short", "referenceId must not be empty."))
        elif len(ref) > MAX_REFERENCE:
            errors.append(
                FieldError(field, "too_long", f"referenceId is at most {MAX_REFERENCE} characters.")
            )
        elif checks.CONTROL.search(ref):
            errors.append(FieldError(field, "invalid_format", checks.control_message(field)))
        elif ref in seen:
            errors.append(
                FieldError(field, "duplicate", f"referenceId {ref!r} is already in this run.")
            )
        else:
            seen.add(ref)
            items.append((ref, item))
    return items


def _jobs_list(body: dict[str, Any], errors: list[FieldError], *, optional: bool) -> list[Any]:
    value = body.get("jobs")
    if value is None:
        if not optional:
            errors.append(FieldError("jobs", "required", "jobs is required (a list of jobs)."))
        return []
    if not isinstance(value, list):
        errors.append(FieldError("jobs", "invalid_type", "jobs must be a list of job objects."))
        return []
    if len(value) > PER_REQUEST:
        errors.append(
            FieldError("jobs", "too_many", f"At most {PER_REQUEST:,} jobs in one request.")
        )
        return []
    return value


def too_few() -> ValidationFailed:
    return ValidationFailed(
        [
            FieldError(
                "jobs",
                "too_few",
                'A run needs at least one job; a snapshot may be empty with "allowEmpty": true.',
            )
        ],
        subject="sync run",
    )


def shape(body: dict[str, Any], *, dry_run: bool) -> Shape:
    """The outer shape of POST /syncs (C11), every violation listed; `dry_run` is the query's."""
    errors: list[FieldError] = []
    mode = body.get("mode")
    if mode is None:
        errors.append(FieldError("mode", "required", "mode is required: upsert or snapshot."))
    elif not isinstance(mode, str):
        errors.append(FieldError("mode", "invalid_type", "mode must be a string."))
    elif mode not in MODES:
        errors.append(FieldError("mode", "out_of_range", "mode must be upsert or snapshot."))
    is_open = _flag(body, "open", errors)
    allow_empty = _flag(body, "allowEmpty", errors)
    dry = _flag(body, "dryRun", errors) or dry_run
    raw = _jobs_list(body, errors, optional=is_open)
    items = _items(raw, "jobs", errors)
    if errors:
        raise ValidationFailed(errors, subject="sync run")
    if not raw and not is_open and not (mode == "snapshot" and allow_empty):
        raise too_few()
    return Shape(cast(str, mode), is_open, allow_empty, dry, items)


def added(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The items of POST /syncs/{id}/jobs, checked within the request (C11)."""
    errors: list[FieldError] = []
    items = _items(_jobs_list(body, errors, optional=False), "jobs", errors)
    if errors:
        raise ValidationFailed(errors, subject="sync run")
    return items


# --- the resource -------------------------------------------------------------------------------


def timestamp(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC with milliseconds (wave 2's timestamps)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def represent(run: Any) -> dict[str, Any]:
    """The sync resource (C11) of a run row or entity."""
    return {
        "id": run.id,
        "mode": run.mode,
        "dryRun": run.dry_run,
        "status": run.status,
        "total": run.total,
        "processed": run.processed,
        "created": run.created,
        "updated": run.updated,
        "unchanged": run.unchanged,
        "archived": run.archived,
        "failed": run.failed,
        "createdAt": timestamp(run.created_at),
        "startedAt": timestamp(run.started_at),
        "finishedAt": timestamp(run.finished_at),
    }


def represent_item(row: Any) -> dict[str, Any]:
    return {
        "referenceId": row.reference_id,
        "outcome": row.outcome,
        "jobId": row.job_id,
        "errors": json.loads(row.errors) if row.errors else [],
        "warnings": json.loads(row.warnings) if row.warnings else [],
    }


def read(connection: Connection, employer_id: int, run_id: int) -> Row[Any]:
    """The employer's run; another employer's is as absent as a missing one (C11)."""
    row = connection.execute(
        select(RUNS).where(RUNS.c.id == run_id, RUNS.c.employer_id == employer_id)
    ).one_or_none()
    if row is None:
        raise NotFound(f"No sync run has id {run_id}.")
    return row


def read_any(connection: Connection, run_id: int) -> Row[Any]:
    """Any employer's run, for the operator (`jobpost syncs show`)."""
    row = connection.execute(select(RUNS).where(RUNS.c.id == run_id)).one_or_none()
    if row is None:
        raise NotFound(f"No sync run has id {run_id}.")
    return row


def listing(
    connection: Connection,
    *,
    employer_id: int | None,
    status: str | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[Row[Any]], int]:
    """Runs newest first (an employer's, or all for the operator) and how many there are."""
    where = []
    if employer_id is not None:
        where.append(RUNS.c.employer_id == employer_id)
    if status is not None:
        where.append(RUNS.c.status == status)
    total = connection.execute(select(func.count()).select_from(RUNS).where(*where)).scalar_one()
    query = select(RUNS).where(*where).order_by(RUNS.c.id.desc()).offset(offset).limit(limit)
    return list(connection.execute(query).all()), int(total)


def item_page(
    connection: Connection, run_id: int, *, outcome: str | None, offset: int, limit: int
) -> tuple[list[Row[Any]], int]:
    """A page of a run's items: as sent, then the archived jobs by referenceId (C11)."""
    where = [ITEMS.c.run_id == run_id]
    if outcome is not None:
        where.append(ITEMS.c.outcome == outcome)
    total = connection.execute(select(func.count()).select_from(ITEMS).where(*where)).scalar_one()
    rows = connection.execute(
        select(
            ITEMS.c.reference_id, ITEMS.c.outcome, ITEMS.c.job_id, ITEMS.c.errors, ITEMS.c.warnings
        )
        .where(*where)
        .order_by(ITEMS.c.position)
        .offset(offset)
        .limit(limit)
    )
    return [cast(Row[Any], r) for r in rows], int(total)


# --- intake: storing ----------------------------------------------------------------------------


def _lock_employer(session: Session, employer_id: int) -> None:
    """One intake of an employer at a time: the one-run rule (C11) holds under concurrent
    requests. SQLite's writers already take turns (BEGIN IMMEDIATE)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Employer.id).where(Employer.id == employer_id).with_for_update())


INSERT_CHUNK = 1000  # rows an INSERT takes at once: the JSON texts of one chunk at a time


def _insert_items(connection: Connection, run_id: int, first: int, items: Sequence[Any]) -> None:
    """The items, a chunk of rows per executemany (a multi-row INSERT on both backends): few
    statements, and only one chunk's JSON texts in memory at a time (a 50 MiB body)."""
    for start_at in range(0, len(items), INSERT_CHUNK):
        rows = [
            {
                "run_id": run_id,
                "position": first + start_at + i,
                "reference_id": ref,
                "body": item if isinstance(item, str) else item_text(item),
                "outcome": "pending",
                "attempts": 0,
            }
            for i, (ref, item) in enumerate(items[start_at : start_at + INSERT_CHUNK])
        ]
        connection.execute(insert(ITEMS), rows)


def hold(session: Session, employer: Employer) -> None:
    """The employer's intake, locked until commit; 409 while a run is in progress (C11)."""
    _lock_employer(session, employer.id)
    connection = session.connection()
    busy = connection.execute(
        select(RUNS.c.id)
        .where(RUNS.c.employer_id == employer.id, RUNS.c.status.in_(IN_PROGRESS))
        .limit(1)
    ).first()
    if busy is not None:
        raise SyncInProgress(
            f"Sync run {busy.id} is still open, queued or running; one run at a time."
        )


def start(session: Session, employer: Employer, request: Shape, *, now: datetime) -> Row[Any]:
    """A new run and its items, in the caller's transaction (after `hold`). The caller
    enqueues a queued run after commit."""
    hold(session, employer)
    connection = session.connection()
    newest = connection.execute(select(func.max(JOBS.c.id))).scalar_one()
    run_id = connection.execute(
        insert(RUNS)
        .values(
            employer_id=employer.id,
            mode=request.mode,
            dry_run=request.dry_run,
            allow_empty=request.allow_empty,
            status="open" if request.open else "queued",
            jobs_before=newest or 0,
            total=len(request.items),
            processed=0,
            created=0,
            updated=0,
            unchanged=0,
            archived=0,
            failed=0,
            created_at=now,
            enqueued_at=None if request.open else now,
            claim=0,
            released=True,
        )
        .returning(RUNS.c.id)
    ).scalar_one()
    _insert_items(connection, run_id, 1, request.items)
    return read(connection, employer.id, run_id)


def _locked(session: Session, employer_id: int, run_id: int) -> Row[Any]:
    connection = session.connection()
    row = connection.execute(
        select(RUNS).where(RUNS.c.id == run_id, RUNS.c.employer_id == employer_id).with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"No sync run has id {run_id}.")
    return row


def _not_open(run: Row[Any], doing: str) -> SyncNotOpen:
    return SyncNotOpen(f"Sync run {run.id} is {run.status}: it can no longer be {doing}.")


def add(session: Session, employer: Employer, run_id: int, body: dict[str, Any]) -> Row[Any]:
    """More items for an open run: referenceIds unique across the run, up to PER_RUN (C11)."""
    run = _locked(session, employer.id, run_id)
    if run.status != "open":
        raise _not_open(run, "added to")
    items = added(body)
    connection = session.connection()
    errors: list[FieldError] = []
    if run.total + len(items) > PER_RUN:
        errors.append(FieldError("jobs", "too_many", f"A run holds at most {PER_RUN:,} jobs."))
    used = _used_references(connection, run_id, [ref for ref, _ in items])
    for i, (ref, _) in enumerate(items):
        if ref in used:
            message = f"referenceId {ref!r} is already in this run."
            errors.append(FieldError(f"jobs[{i}].referenceId", "duplicate", message))
    if errors:
        raise ValidationFailed(errors, subject="sync run")
    _insert_items(connection, run_id, run.total + 1, items)
    connection.execute(
        update(RUNS).where(RUNS.c.id == run_id).values(total=RUNS.c.total + len(items))
    )
    return read(connection, employer.id, run_id)


def _used_references(connection: Connection, run_id: int, refs: list[str]) -> set[str]:
    used: set[str] = set()
    for i in range(0, len(refs), _CHUNK):
        chunk = refs[i : i + _CHUNK]
        used.update(
            connection.execute(
                select(ITEMS.c.reference_id).where(
                    ITEMS.c.run_id == run_id, ITEMS.c.reference_id.in_(chunk)
                )
            ).scalars()
        )
    return used


def queue(session: Session, employer: Employer, run_id: int, *, now: datetime) -> Row[Any]:
    """POST /syncs/{id}/start: an open run becomes queued; an empty one follows the rule
    for empty runs (C11)."""
    run = _locked(session, employer.id, run_id)
    if run.status != "open":
        raise _not_open(run, "started")
    if run.total == 0 and not (run.mode == "snapshot" and run.allow_empty):
        raise too_few()
    session.connection().execute(
        update(RUNS).where(RUNS.c.id == run_id).values(status="queued", enqueued_at=now)
    )
    return read(session.connection(), employer.id, run_id)


def cancel(session: Session, employer_id: int | None, run_id: int, *, now: datetime) -> Row[Any]:
    """An open, queued or running run becomes cancelled: applied items stay applied, the
    rest stay pending, no snapshot archiving (C11). `employer_id` None: the operator's."""
    connection = session.connection()
    where = [RUNS.c.id == run_id]
    if employer_id is not None:
        where.append(RUNS.c.employer_id == employer_id)
    row = connection.execute(select(RUNS).where(*where).with_for_update()).one_or_none()
    if row is None:
        raise NotFound(f"No sync run has id {run_id}.")
    if row.status not in IN_PROGRESS:
        raise _not_open(row, "cancelled")
    connection.execute(
        update(RUNS)
        .where(RUNS.c.id == run_id)
        .values(status="cancelled", finished_at=now, lease_until=None)
    )
    return connection.execute(select(RUNS).where(RUNS.c.id == run_id)).one()


# --- the worker's steps ------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """A run this worker holds, as its claim number names it."""

    id: int
    employer_id: int
    mode: str
    dry_run: bool
    jobs_before: int
    total: int
    claim: int
    resumed: bool = False  # taken back from a worker that did not let go: it may have died


class Lost(Exception):
    """The run was cancelled, or its lease ran out and another worker holds it."""


def claim(session: Session, run_id: int, *, now: datetime, lease_seconds: float) -> Claimed | None:
    """Take the run: queued, or running with its lease run out or let go (C11). A run taken
    back from a worker that did not let go blames its first pending item for that worker's
    end; an item blamed KILLS times fails with internal_error and the run goes on."""
    connection = session.connection()
    run = connection.execute(select(RUNS).where(RUNS.c.id == run_id)).one_or_none()
    if run is None:
        return None
    free = run.status == "queued" or (
        run.status == "running"
        and (run.released or run.lease_until is None or run.lease_until < now)
    )
    if not free:
        return None
    won = connection.execute(
        update(RUNS)
        .where(RUNS.c.id == run_id, RUNS.c.claim == run.claim, RUNS.c.status == run.status)
        .values(
            status="running",
            claim=run.claim + 1,
            lease_until=now + timedelta(seconds=lease_seconds),
            started_at=func.coalesce(RUNS.c.started_at, now),
            released=False,
        )
    ).rowcount
    if won != 1:
        return None
    resumed = run.status == "running" and not run.released
    held = Claimed(
        run.id,
        run.employer_id,
        run.mode,
        run.dry_run,
        run.jobs_before,
        run.total,
        run.claim + 1,
        resumed,
    )
    if resumed:
        _blame(connection, held, now + timedelta(seconds=lease_seconds))
    return held


def _blame(connection: Connection, run: Claimed, lease_until: datetime) -> None:
    first = connection.execute(
        select(ITEMS.c.position, ITEMS.c.attempts)
        .where(ITEMS.c.run_id == run.id, ITEMS.c.outcome == "pending")
        .order_by(ITEMS.c.position)
        .limit(1)
    ).first()
    if first is None:
        return
    attempts = first.attempts + 1
    values: dict[str, Any] = {"attempts": attempts}
    if attempts >= KILLS:
        named = select(JOBS.c.id).where(
            JOBS.c.employer_id == run.employer_id, JOBS.c.reference_id == ITEMS.c.reference_id
        )
        values.update(
            outcome="failed",
            errors=_errors_text([internal_error()]),
            job_id=named.scalar_subquery(),
        )
    connection.execute(
        update(ITEMS)
        .where(ITEMS.c.run_id == run.id, ITEMS.c.position == first.position)
        .values(**values)
    )
    if attempts >= KILLS:
        _count(connection, run, "failed", lease_until)


def internal_error() -> FieldError:
    return FieldError(
        "", "internal_error", "Processing this job ended the worker; it was not applied."
    )


def _errors_text(errors: Iterable[FieldError]) -> str | None:
    listed = [e.as_dict() for e in errors]
    return orjson.dumps(listed).decode() if listed else None


@dataclass(frozen=True)
class Pending:
    position: int
    reference_id: str
    body: str


def pending(connection: Connection, run_id: int, *, after: int, limit: int) -> list[Pending]:
    rows = connection.execute(
        select(ITEMS.c.position, ITEMS.c.reference_id, ITEMS.c.body)
        .where(ITEMS.c.run_id == run_id, ITEMS.c.outcome == "pending", ITEMS.c.position > after)
        .order_by(ITEMS.c.position)
        .limit(limit)
    )
    return [Pending(r.position, r.reference_id, r.body or "{}") for r in rows]


# One statement each, built once: they run once per item.
RECORD = (
    update(ITEMS)
    .where(
        ITEMS.c.run_id == bindparam("run"),
        ITEMS.c.position == bindparam("pos"),
        ITEMS.c.outcome == "pending",
    )
    .values(
        outcome=bindparam("new_outcome"),
        job_id=bindparam("job"),
        errors=bindparam("new_errors"),
        warnings=bindparam("new_warnings"),
    )
)
_COUNTS = {
    outcome: update(RUNS)
    .where(
        RUNS.c.id == bindparam("run"),
        RUNS.c.claim == bindparam("holder"),
        RUNS.c.status == "running",
    )
    .values(
        {
            "processed": RUNS.c.processed + 1,
            outcome: RUNS.c[outcome] + 1,
            "lease_until": bindparam("lease"),
        }
    )
    for outcome in ("created", "updated", "unchanged", "failed")
}


# On PostgreSQL the item's outcome and the run's counts go in one statement (one round trip
# per item fewer); the counts move only if the item was still pending.
_RECORDED = RECORD.returning(ITEMS.c.position).cte("recorded")
_RECORD_AND_COUNT = {
    outcome: statement.where(exists(select(_RECORDED.c.position))).add_cte(_RECORDED)
    for outcome, statement in _COUNTS.items()
}


def _count(connection: Connection, run: Claimed, outcome: str, lease_until: datetime) -> None:
    """Move the counts, renewing the lease, only while this worker holds the running run:
    otherwise the item's transaction is rolled back (`Lost`)."""
    params = {"run": run.id, "holder": run.claim, "lease": lease_until}
    if connection.execute(_COUNTS[outcome], params).rowcount != 1:
        raise Lost(run.id)


@dataclass(frozen=True)
class Outcome:
    outcome: str
    job_id: int | None
    errors: list[FieldError]
    warnings: list[dict[str, Any]]


def apply_job(
    session: Session, employer: Employer, body: dict[str, Any], *, today: date, dry_run: bool
) -> Outcome:
    """One item, applied exactly as PUT /jobs with that body would be (C11), by the same
    domain function; a dry run writes nothing and names no job it would create."""
    applied = jobs.apply(session, employer, body, today=today, dry_run=dry_run)
    job_id = applied.job.id or None  # 0: a job a dry run would create
    return Outcome(applied.outcome, job_id, [], [w.as_dict() for w in applied.warnings])


def apply_item(
    session: Session,
    run: Claimed,
    employer: Employer,
    item: Pending,
    *,
    today: date,
    lease_until: datetime,
) -> str:
    """Apply one item and record its outcome and the run's counts in one transaction, which
    the caller commits. A failing item writes nothing but its outcome (the caller rolls back
    a domain error's work first: `failed`)."""
    done = apply_job(session, employer, read_item(item.body), today=today, dry_run=run.dry_run)
    record(session.connection(), run, item, done, lease_until)
    return done.outcome


def record(
    connection: Connection, run: Claimed, item: Pending, done: Outcome, lease_until: datetime
) -> None:
    """The item's outcome and the run's counts, only while this worker holds the run (else
    `Lost`: the caller rolls the item's transaction back)."""
    params = {
        "run": run.id,
        "pos": item.position,
        "new_outcome": done.outcome,
        "job": done.job_id,
        "new_errors": _errors_text(done.errors),
        "new_warnings": orjson.dumps(done.warnings).decode() if done.warnings else None,
    }
    if connection.dialect.name == "postgresql":
        params.update(holder=run.claim, lease=lease_until)
        if connection.execute(_RECORD_AND_COUNT[done.outcome], params).rowcount != 1:
            raise Lost(run.id)
        return
    connection.execute(RECORD, params)
    _count(connection, run, done.outcome, lease_until)


def failed(errors: list[FieldError], job_id: int | None = None) -> Outcome:
    """A failed item's outcome: `job_id` the job its referenceId names, if one exists (C11)."""
    return Outcome("failed", job_id, errors, [])


def let_go(session: Session, run: Claimed, *, now: datetime) -> bool:
    """Hand the run on (a task's time is up): the next task takes it at once."""
    result = session.connection().execute(
        update(RUNS)
        .where(RUNS.c.id == run.id, RUNS.c.claim == run.claim, RUNS.c.status == "running")
        .values(released=True, lease_until=now, enqueued_at=now)
    )
    return bool(result.rowcount == 1)


def finish(session: Session, run: Claimed, *, now: datetime) -> int:
    """After the items: a snapshot archives every active job with a referenceId, made
    before the run, that the run does not name (C11); then the run is completed. One
    transaction: the archiving runs once, and each job is archived once. Returns how many."""
    connection = session.connection()
    archived: list[Row[Any]] = []
    if run.mode == "snapshot" and connection.dialect.name == "postgresql":
        # Planned with statistics taken before the run's items were (a run takes a minute,
        # autovacuum may not have looked yet), the anti-join was a nested loop reading every
        # item of the run for each job: 26 s for 10,000 of each. Hashed or merged, it is
        # linear whatever the statistics say. For this transaction only.
        connection.exec_driver_sql("SET LOCAL enable_nestloop = off")
    if run.mode == "snapshot":
        named = exists().where(
            ITEMS.c.run_id == run.id, ITEMS.c.reference_id == JOBS.c.reference_id
        )
        archived = list(
            connection.execute(
                select(JOBS.c.id, JOBS.c.reference_id)
                .where(
                    JOBS.c.employer_id == run.employer_id,
                    JOBS.c.status == "active",
                    JOBS.c.reference_id.is_not(None),
                    JOBS.c.id <= run.jobs_before,
                    ~named,
                )
                .order_by(JOBS.c.reference_id)
            )
        )
    if archived and not run.dry_run:
        ids = [row.id for row in archived]
        for i in range(0, len(ids), _CHUNK):
            connection.execute(
                update(JOBS)
                .where(JOBS.c.id.in_(ids[i : i + _CHUNK]), JOBS.c.status == "active")
                .values(status="archived", version=JOBS.c.version + 1, updated_at=now)
            )
    if archived:
        top = connection.execute(
            select(func.max(ITEMS.c.position)).where(ITEMS.c.run_id == run.id)
        ).scalar_one()
        connection.execute(
            insert(ITEMS),
            [
                {
                    "run_id": run.id,
                    "position": (top or 0) + 1 + i,
                    "reference_id": row.reference_id,
                    "body": None,
                    "outcome": "archived",
                    "job_id": row.id,
                    "attempts": 0,
                }
                for i, row in enumerate(archived)
            ],
        )
    done = connection.execute(
        update(RUNS)
        .where(RUNS.c.id == run.id, RUNS.c.claim == run.claim, RUNS.c.status == "running")
        .values(
            status="completed",
            finished_at=now,
            lease_until=None,
            released=True,
            archived=len(archived),
        )
    ).rowcount
    if done != 1:
        raise Lost(run.id)
    _completed(session, run, now=now)
    return len(archived)


def _completed(session: Session, run: Claimed, *, now: datetime) -> None:
    """The run's `sync.completed` event (C11, C12), its data the sync resource, written in
    the transaction that completes the run: once, and only if the run completes. None for a
    dry run. The webhook sweeper delivers it."""
    if run.dry_run:
        return
    resource = represent(read_any(session.connection(), run.id))
    webhooks.emit(session, run.employer_id, "sync.completed", resource, now=now)


# --- the sweeper and the purge -----------------------------------------------------------------


def sweep(session: Session, *, now: datetime, grace_seconds: float) -> list[int]:
    """Runs to enqueue (C11): queued ones whose message may be lost (not enqueued within the
    grace period), running ones whose lease ran out or was let go; each marked enqueued now.
    Open runs not started within 24 hours become cancelled."""
    connection = session.connection()
    connection.execute(
        update(RUNS)
        .where(RUNS.c.status == "open", RUNS.c.created_at < now - OPEN_FOR)
        .values(status="cancelled", finished_at=now)
    )
    settled = or_(
        RUNS.c.enqueued_at.is_(None), RUNS.c.enqueued_at < now - timedelta(seconds=grace_seconds)
    )
    lapsed = and_(
        RUNS.c.status == "running", or_(RUNS.c.released.is_(True), RUNS.c.lease_until < now)
    )
    due = or_(RUNS.c.status == "queued", lapsed)
    ids = list(
        connection.execute(
            select(RUNS.c.id).where(RUNS.c.status.in_(("queued", "running")), due, settled)
        ).scalars()
    )
    if ids:
        connection.execute(update(RUNS).where(RUNS.c.id.in_(ids)).values(enqueued_at=now))
    return ids


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Runs and their items SYNC_RETENTION_DAYS after they finished (C11); runs purged."""
    connection = session.connection()
    old = select(RUNS.c.id).where(RUNS.c.finished_at < now - timedelta(days=retention_days))
    ids = list(connection.execute(old).scalars())
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        connection.execute(delete(ITEMS).where(ITEMS.c.run_id.in_(chunk)))
        connection.execute(delete(RUNS).where(RUNS.c.id.in_(chunk)))
    return len(ids)


def counts_by_status(connection: Connection) -> dict[str, int]:
    """Runs by status, for jobpost_syncs{status} (C11)."""
    rows = connection.execute(select(RUNS.c.status, func.count()).group_by(RUNS.c.status))
    found = {status: int(n) for status, n in rows}
    return {status: found.get(status, 0) for status in STATUSES}
