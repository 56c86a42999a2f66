"""A sync run's items applied a batch per transaction (C11): the worker's fast path.

One item per transaction cost a sync run several round trips and a commit per item, and a
run went no faster than a PUT loop. A batch costs a fixed number of statements for its reads
and its bookkeeping: the items resent as their last sync write left them found unchanged by
one unlocked read (models.syncs.digests); the other items' jobs read whole and locked by
referenceId at once, each such item checked by the rules `PUT /jobs` uses (models.jobs.writes's
`plan_put`, `plan_create`) before anything is written; the creates inserted together, each
update written by `jobs`'s own statement, the outcomes recorded in one statement and the
run's counts in one UPDATE.

Every rule is checked before the first write, so an item that breaks one fails alone and
leaves nothing behind; anything else raised leaves the transaction to the caller, which
rolls it back and applies the batch's items one transaction each (workers.syncing). The
writes are stamped (models.db.feed) only once every item is checked: the transaction holds its
oldest change for as long as its writes take, not its checks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Integer, bindparam, update
from sqlalchemy.orm import Session

from models.core.errors import (
    DomainError,
    DuplicateReferenceId,
    FieldError,
    JobTakenDown,
    ValidationFailed,
)
from models.db import json_rows, leases
from models.db.entities import Employer
from models.db.feed import stamp
from models.jobs import events as job_events
from models.jobs import rows as job_rows
from models.jobs import writes as jobs
from models.jobs.rows import StoredJob
from models.jobs.warnings import Warning
from models.notifications import queue as notifications
from models.syncs.digests import Digests
from models.syncs.processing import (
    RECORD,
    Claimed,
    Lost,
    Outcome,
    Pending,
    changes_of,
    failed,
    holder,
    holding,
)
from models.syncs.requests import read_item
from models.syncs.runs import ITEMS, RUNS


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
    # A create's warnings but location_added, and its row but updated_at: made by whoever
    # checked it (the planner, where the CPU is free), written by the run's session.
    answered: list[Warning] | None = None
    row: dict[str, Any] | None = None
    # Its job as stored (None: created) and as written, for the batch's events (C12).
    written: tuple[StoredJob | None, StoredJob] | None = None


def _outcome_of(applied: jobs.Applied, employer: Employer) -> Outcome:
    changed = changes_of(applied.stored, applied.job, employer.name)
    warned = [w.as_dict() for w in applied.warnings]
    return Outcome(applied.outcome, applied.job.id, [], warned, changed)


@dataclass
class Prepared:
    """A batch as far as it can be checked without its locks (`prepare`): the items resent
    unchanged decided, the creates checked; the items whose jobs existed at the read are
    locked and checked by `apply_prepared`, in the writing transaction."""

    items: list[_Item]
    existing: set[str]  # the referenceIds whose jobs existed at the read
    today: date
    digests: Digests  # for `today`


def prepare(session: Session, employer: Employer, batch: list[Pending], *, today: date) -> Prepared:
    """Read and check what of `batch` needs no lock, in any transaction (another thread's
    too: a worker checks the next batch while it writes this one, workers.syncing). A
    referenceId appears once in a run, so the batches before leave it as this read finds it
    but for another writer's change, which the write meets as PUT would (`_insert`)."""
    digests = Digests(employer, today)
    refs = [p.reference_id for p in batch]
    last = job_rows.last_written(session.connection(), employer.id, refs)
    items = [_resent(digests, pending, last.get(pending.reference_id)) for pending in batch]
    for item in items:
        if item.done is None and item.pending.reference_id not in last:
            item.body = read_item(item.pending.body)
            _plan(session, employer, item, None, today)
            _fill_create(employer, digests, item, today)
    return Prepared(items, set(last), today, digests)


def _fill_create(employer: Employer, digests: Digests, item: _Item, today: date) -> None:
    """A planned create's warnings and row (see `_Item`)."""
    change = item.change
    if change is None or change.stored is not None or item.row is not None:
        return
    item.answered = jobs.write_warnings(employer, change.job, change.notes, today=today)
    item.row = jobs.new_row(change, digests.kept(change, item.pending.body, item.answered))


def apply_prepared(
    session: Session,
    run: Claimed,
    employer: Employer,
    prepared: Prepared,
    *,
    lease_until: datetime,
) -> list[str]:
    """Apply a prepared batch (not a dry run) in the caller's transaction, which the caller
    commits: each item's job change and outcome, and the run's counts, only while this
    worker holds the run (else `Lost`). Returns the outcomes in order."""
    connection = session.connection()
    today, items = prepared.today, prepared.items
    held = [i for i in items if i.done is None and i.pending.reference_id in prepared.existing]
    stored = job_rows.lock_many(connection, employer.id, [i.pending.reference_id for i in held])
    for item in held:
        job = stored.get(item.pending.reference_id)
        item.body, item.job_id = read_item(item.pending.body), job.id if job else None
        _plan(session, employer, item, job, today)
    _write(session, employer, items, prepared.digests, today)
    _announce(session, employer, items)
    _record(connection, run, items, lease_until)
    return [item.done.outcome for item in items if item.done is not None]


def _announce(session: Session, employer: Employer, items: list[_Item]) -> None:
    """The batch's `job.created` and `job.updated` (C12), each type one statement for the
    whole batch (`models.jobs.events.written`); the sweeper hands them to the workers."""
    pairs = [item.written for item in items if item.written is not None]
    if not pairs:
        return
    created = [w for s, w in pairs if s is None]
    updated = [(s, w) for s, w in pairs if s is not None]
    last = max(w.updated_at for _s, w in pairs if w.updated_at is not None)
    job_events.written(
        session, employer.id, employer.name, created=created, updated=updated, now=last
    )


def _resent(digests: Digests, pending: Pending, last: job_rows.Written | None) -> _Item:
    """The item, unchanged already when its job is as the item's own last write left it
    (models.syncs.digests): such an item is not checked again."""
    answered = None if last is None else digests.unchanged(last, pending.body)
    if last is None or answered is None:
        return _Item(pending, {}, None)
    return _Item(pending, {}, last.job_id, Outcome("unchanged", last.job_id, [], answered))


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
        item.done = _outcome_of(planned, employer)
    else:
        item.change = planned


def _write(
    session: Session, employer: Employer, items: list[_Item], digests: Digests, today: date
) -> None:
    """The changes in the items' order: each run of creates inserted together, each update
    by itself (a place first written by an earlier item is that item's `location_added`),
    each keeping what its item's resend needs (models.syncs.digests)."""
    creates: list[_Item] = []
    for item in items:
        if item.change is None:
            continue
        if item.change.stored is None:
            creates.append(item)
            continue
        _insert(session, employer, creates, digests, today)
        creates = []
        answered = jobs.write_warnings(employer, item.change.job, item.change.notes, today=today)
        kept = digests.kept(item.change, item.pending.body, answered)
        written = jobs.write_update(session, employer, item.change, today=today, kept=kept)
        item.done = _outcome_of(replace(written, stored=item.change.stored), employer)
        item.job_id = item.done.job_id
        item.written = (item.change.stored, written.job)
    _insert(session, employer, creates, digests, today)


def _insert(
    session: Session, employer: Employer, creates: list[_Item], digests: Digests, today: date
) -> None:
    if not creates:
        return
    written = []
    for item in creates:
        _fill_create(employer, digests, item, today)  # those checked here, not by the planner
        assert item.change is not None and item.row is not None
        written.append((item.change.job, item.row))
    at = stamp(session)
    found = job_rows.insert_many(session.connection(), written, at)
    published = [
        found[ref][0]
        for job, _row in written
        if (ref := str(job.reference_id)) in found
        if job.status == "active"
    ]
    notifications.jobs_changed(session, updated=published)  # C18
    for item in creates:
        assert item.change is not None and item.answered is not None
        ref = item.pending.reference_id
        if ref in found:
            job_id, listed = found[ref]
            said = jobs.with_location_added(item.change.job, item.answered, listed)
            item.done = Outcome("created", job_id, [], [w.as_dict() for w in said])
            item.written = (None, replace(item.change.job, id=job_id, updated_at=at))
            continue
        # Created meanwhile by another writer: applied to that job, as PUT /jobs would be.
        try:
            applied = jobs.apply(session, employer, item.body, today=today, whole=True)
            item.done = _outcome_of(applied, employer)
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
                "position": item.pending.position,
                "outcome": done.outcome,
                "job_id": done.job_id,
                "errors": _text([e.as_dict() for e in done.errors]),
                "warnings": _text(done.warnings),
                "changes": _text(done.changes),
            }
        )
    moved = holding(
        processed=RUNS.c.processed + len(items),
        lease_until=lease_until,
        **{name: RUNS.c[name] + n for name, n in counts.items() if n},
    )
    if leases.changed(connection, moved, holder(run)) != 1:
        raise Lost(run.id)
    if connection.dialect.name != "postgresql":  # RECORD's parameters, as `syncs.record`'s
        connection.execute(RECORD, [_record_params(run, row) for row in rows])
        return
    span = {"run": run.id, "first": rows[0]["position"], "last": rows[-1]["position"]}
    given = {json_rows.PARAMETER: json_rows.text(rows)}
    if connection.execute(_record_many(), span | given).rowcount != len(rows):
        raise Lost(run.id)  # an item no longer pending: only another holder could do that


def _record_params(run: Claimed, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": run.id,
        "pos": row["position"],
        "new_outcome": row["outcome"],
        "job": row["job_id"],
        "new_errors": row["errors"],
        "new_warnings": row["warnings"],
        "new_changes": row["changes"],
    }


@functools.cache
def _record_many() -> Any:
    """The outcomes of a batch in one UPDATE from one JSON parameter (PostgreSQL), its rows
    bounded by the batch's first and last positions. Planned with statistics taken while the
    table was empty, an UPDATE of one item read every pending item of the run (and the dead
    index entries of those done) to find it: 9.7 ms of the database's CPU an item in the
    sync bench. The bounds keep any plan to the batch's own entries."""
    given = json_rows.rows_of(ITEMS)
    return (
        update(ITEMS)
        .where(
            ITEMS.c.run_id == bindparam("run", type_=Integer),
            ITEMS.c.position == given.c.position,
            ITEMS.c.position.between(
                bindparam("first", type_=Integer), bindparam("last", type_=Integer)
            ),
            ITEMS.c.outcome == "pending",
        )
        .values(
            outcome=given.c.outcome,
            job_id=given.c.job_id,
            errors=given.c.errors,
            warnings=given.c.warnings,
            changes=given.c.changes,
        )
    )


def _text(entries: list[dict[str, Any]]) -> str | None:
    return orjson.dumps(entries).decode() if entries else None
