"""Sync runs (C11): the employer's jobs sent at once, kept as items, applied by the workers.

The API checks only a run's outer shape and stores the run and its items in one transaction
(`start`, `add`); the worker (workers.syncing) claims the run under a lease and applies its
items one transaction each (`apply_item`), then archives what a snapshot left out, once
(`finish`), on `models.db.leases` (`models.syncs.processing`). Every transition of a run is
a conditional UPDATE naming the claim it expects, so a worker whose lease ran out can no
longer commit anything (C11: never twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Row,
    Table,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from models.core.errors import DomainError, FieldError, NotFound, ValidationFailed
from models.db.entities import Employer, Job, SyncItem, SyncRun
from models.syncs.requests import SyncRequest, added, item_text, too_few

RUNS = cast(Table, SyncRun.__table__)
ITEMS = cast(Table, SyncItem.__table__)
JOBS = cast(Table, Job.__table__)

STATUSES = ("open", "queued", "running", "completed", "cancelled")
OUTCOMES = ("pending", "created", "updated", "unchanged", "archived", "failed")
IN_PROGRESS = ("open", "queued", "running")
PER_RUN = 1_000_000  # items in one open run (C11)
OPEN_FOR = timedelta(hours=24)  # an open run not started by then is cancelled (C11)
KILLS = 3  # an item whose processing ended its worker this often fails (C11)
IN_CHUNK = 500  # bound values per IN (...) list: well under SQLite's limit


class SyncInProgress(DomainError):
    code = "sync_in_progress"


class SyncNotOpen(DomainError):
    code = "sync_not_open"


# --- intake: the outer shape --------------------------------------------------------------------


# --- the resource -------------------------------------------------------------------------------


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
            ITEMS.c.reference_id,
            ITEMS.c.outcome,
            ITEMS.c.job_id,
            ITEMS.c.errors,
            ITEMS.c.warnings,
            ITEMS.c.changes,
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


def lock_intake(session: Session, employer: Employer) -> None:
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


def start(session: Session, employer: Employer, request: SyncRequest, *, now: datetime) -> Row[Any]:
    """A new run and its items, in the caller's transaction (after `lock_intake`). The caller
    enqueues a queued run after commit."""
    lock_intake(session, employer)
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
    for i in range(0, len(refs), IN_CHUNK):
        chunk = refs[i : i + IN_CHUNK]
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
