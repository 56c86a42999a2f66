"""A sync run's items applied a batch per transaction (C11): the worker's fast path.

One item per transaction cost a sync run several round trips and a commit per item, and a
run went no faster than a PUT loop. A batch costs a fixed number of statements for its reads
and its bookkeeping: its jobs read whole and locked by referenceId at once, every item
checked by the rules `PUT /jobs` uses (models.jobs's `plan_put`, `plan_create`) before
anything is written, the creates inserted together, each update written by `jobs`'s own
statement, the outcomes recorded in one executemany and the run's counts in one UPDATE.

Every rule is checked before the first write, so an item that breaks one fails alone and
leaves nothing behind; anything else raised leaves the transaction to the caller, which
rolls it back and applies the batch's items one transaction each (workers.syncing). The
writes are stamped (models.feed) only once every item is checked: the transaction holds its
oldest change for as long as its writes take, not its checks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Integer, bindparam, func, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from models import job_rows, jobs
from models.entities import Employer
from models.errors import (
    DomainError,
    DuplicateReferenceId,
    FieldError,
    JobTakenDown,
    ValidationFailed,
)
from models.feed import stamp
from models.job_rows import StoredJob
from models.syncs import ITEMS, RECORD, RUNS, Claimed, Lost, Outcome, Pending, failed, read_item


def errors_of(error: DomainError) -> list[FieldError]:
    """A domain error as an item's C1 entries."""
    if isinstance(error, ValidationFailed):
        return list(error.errors)
    if isinstance(error, DuplicateReferenceId):
        return [FieldError("referenceId", "duplicate", error.detail)]
    if isinstance(error, JobTakenDown):  # C13: re-publishing what an operator took down
        return [FieldError("status", "job_taken_down", error.detail)]
    return [FieldError("", "internal_error", error.detail)]


@dataclass
class _Item:
    pending: Pending
    body: dict[str, Any]
    job_id: int | None  # the job it names, if one exists
    done: Outcome | None = None  # decided: unchanged or failed, then written
    change: jobs.Change | None = None  # to write


def _done(applied: jobs.Applied) -> Outcome:
    return Outcome(applied.outcome, applied.job.id, [], [w.as_dict() for w in applied.warnings])


def apply_batch(
    session: Session,
    run: Claimed,
    employer: Employer,
    batch: list[Pending],
    *,
    today: date,
    lease_until: datetime,
) -> list[str]:
    """Apply `batch` (not a dry run) in the caller's transaction, which the caller commits:
    each item's job change and outcome, and the run's counts, only while this worker holds
    the run (else `Lost`). Returns the outcomes in order."""
    connection = session.connection()
    stored = job_rows.lock_many(connection, employer.id, [p.reference_id for p in batch])
    items = []
    for pending in batch:
        job = stored.get(pending.reference_id)
        item = _Item(pending, read_item(pending.body), job.id if job else None)
        _plan(session, employer, item, job, today)
        items.append(item)
    _write(session, employer, items, today)
    _record(connection, run, items, lease_until)
    return [item.done.outcome for item in items if item.done is not None]


def _plan(
    session: Session, employer: Employer, item: _Item, job: StoredJob | None, today: date
) -> None:
    """Check the item as PUT /jobs would (C11): its outcome if it fails or changes nothing,
    else the change to write."""
    try:
        if job is None:
            item.change = jobs.plan_create(session, employer, item.body, today=today)
            return
        planned = jobs.plan_put(session, employer, job, item.body, today=today)
    except DomainError as e:
        item.done = failed(errors_of(e), item.job_id)
        return
    if isinstance(planned, jobs.Applied):
        item.done = _done(planned)
    else:
        item.change = planned


def _write(session: Session, employer: Employer, items: list[_Item], today: date) -> None:
    """The changes in the items' order: each run of creates inserted together, each update
    by itself (a place first written by an earlier item is that item's `location_added`)."""
    creates: list[_Item] = []
    for item in items:
        if item.change is None:
            continue
        if item.change.stored is None:
            creates.append(item)
            continue
        _insert(session, employer, creates, today)
        creates = []
        item.done = _done(jobs.write_update(session, employer, item.change, today=today))
        item.job_id = item.done.job_id
    _insert(session, employer, creates, today)


def _insert(session: Session, employer: Employer, creates: list[_Item], today: date) -> None:
    if not creates:
        return
    at = stamp(session)
    written = [jobs.insert_values(item.change, at) for item in creates if item.change]
    found = job_rows.insert_many(session.connection(), written)
    for item in creates:
        assert item.change is not None
        ref = item.pending.reference_id
        if ref in found:
            job_id, listed = found[ref]
            item.done = _done(jobs.created(employer, item.change, job_id, at, listed, today=today))
            continue
        # Created meanwhile by another writer: applied to that job, as PUT /jobs would be.
        try:
            item.done = _done(jobs.apply(session, employer, item.body, today=today))
        except DomainError as e:
            holder = job_rows.holder(session.connection(), employer.id, ref)
            item.done = failed(errors_of(e), holder)


def _record(
    connection: Connection, run: Claimed, items: list[_Item], lease_until: datetime
) -> None:
    """The outcomes (one executemany) and the run's counts (one UPDATE, renewing the lease),
    only while this worker holds the running run."""
    rows = []
    counts = {"created": 0, "updated": 0, "unchanged": 0, "failed": 0}
    for item in items:
        done = item.done
        assert done is not None
        counts[done.outcome] += 1
        rows.append(
            {
                "run": run.id,
                "pos": item.pending.position,
                "new_outcome": done.outcome,
                "job": done.job_id,
                "new_errors": _text([e.as_dict() for e in done.errors]),
                "new_warnings": _text(done.warnings),
            }
        )
    moved = connection.execute(
        update(RUNS)
        .where(RUNS.c.id == run.id, RUNS.c.claim == run.claim, RUNS.c.status == "running")
        .values(
            {"processed": RUNS.c.processed + len(items), "lease_until": lease_until}
            | {name: RUNS.c[name] + n for name, n in counts.items() if n}
        )
    ).rowcount
    if moved != 1:
        raise Lost(run.id)
    if connection.dialect.name != "postgresql":
        connection.execute(RECORD, rows)
        return
    arrays = {name: [row[key] for row in rows] for name, key in _RECORDED.items()}
    span = {"run": run.id, "first": rows[0]["pos"], "last": rows[-1]["pos"]}
    if connection.execute(_record_many(), span | arrays).rowcount != len(rows):
        raise Lost(run.id)  # an item no longer pending: only another holder could do that


# The outcome arrays' names, and the key of each in a row of RECORD's parameters.
_RECORDED = {
    "positions": "pos",
    "outcomes": "new_outcome",
    "jobs": "job",
    "errors": "new_errors",
    "warnings": "new_warnings",
}


@functools.cache
def _record_many() -> Any:
    """The outcomes of a batch in one UPDATE from arrays (PostgreSQL), its rows bounded by
    the batch's first and last positions. Planned with statistics taken while the table was
    empty, an UPDATE of one item read every pending item of the run (and the dead index
    entries of those done) to find it: 9.7 ms of the database's CPU an item in the sync
    bench. The bounds keep any plan to the batch's own entries."""
    types = {
        "positions": ITEMS.c.position.type,
        "outcomes": ITEMS.c.outcome.type,
        "jobs": ITEMS.c.job_id.type,
        "errors": ITEMS.c.errors.type,
        "warnings": ITEMS.c.warnings.type,
    }
    arrays = [
        sql_cast(bindparam(name, type_=postgresql.ARRAY(t)), postgresql.ARRAY(t))
        for name, t in types.items()
    ]
    given = func.unnest(*arrays).table_valued(*types).render_derived()
    return (
        update(ITEMS)
        .where(
            ITEMS.c.run_id == bindparam("run", type_=Integer),
            ITEMS.c.position == given.c.positions,
            ITEMS.c.position.between(
                bindparam("first", type_=Integer), bindparam("last", type_=Integer)
            ),
            ITEMS.c.outcome == "pending",
        )
        .values(
            outcome=given.c.outcomes,
            job_id=given.c.jobs,
            errors=given.c.errors,
            warnings=given.c.warnings,
        )
    )


def _text(entries: list[dict[str, Any]]) -> str | None:
    return orjson.dumps(entries).decode() if entries else None
