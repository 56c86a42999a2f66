"""A queued run worked off (C11): claimed under a lease, its items applied one
transaction each, then finished once; and the sweep of lost leases and the purge.

A run is leased work on `models.db.leases` (`QUEUE`): every transition is one of its
conditional UPDATEs naming the claim it expects, so a worker whose lease ran out can no
longer commit anything (C11: never twice). A run is claimed by its id whenever its message
comes (it has no time it falls due), its claim number is the holder's token, and a holder
lets go with `released` so that the next task takes it at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import (
    Connection,
    Row,
    Update,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from models.core.errors import FieldError
from models.db import leases
from models.db.entities import Employer
from models.jobs import writes as jobs
from models.jobs.rows import StoredJob
from models.notifications import queue as notifications
from models.syncs.requests import read_item
from models.syncs.runs import (
    IN_CHUNK,
    ITEMS,
    JOBS,
    KILLS,
    OPEN_FOR,
    RUNS,
    STATUSES,
    read_any,
)
from models.webhooks import messages as webhook_messages
from models.webhooks import payloads

# Runs as leased work: queued ones are claimable at once (no due time), running ones are
# held, `claim` counts the claims and names the holder, `released` is a holder letting go.
QUEUE = leases.Queue(
    RUNS,
    "id",
    STATUSES,
    ("completed", "cancelled"),
    waiting="queued",
    held="running",
    due=None,
    attempts=None,
    token="claim",
    let_go="released",
    finished_at="finished_at",
)


def holding(**values: Any) -> Update:
    """An UPDATE of the run bound as `entry` → `values`, while the claim bound as `token`
    holds it running (`holder`'s parameters)."""
    return leases.as_holder(QUEUE, **values)


def holder(run: Claimed) -> dict[str, int]:
    """The parameters naming `run` under this worker's claim, for `holding`'s statements."""
    return {"entry": run.id, "token": run.claim}


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
        changes=bindparam("new_changes"),
    )
)


_COUNTS = {
    outcome: holding(
        processed=RUNS.c.processed + 1,
        **{outcome: RUNS.c[outcome] + 1},
        lease_until=bindparam("lease"),
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


# The claim: claimable (queued, or running with its lease run out or let go) and still as the
# worker read it (its claim number and status), so that what the read told (a run taken
# back from a worker that did not let go) is what the claim took.
_CLAIM = leases.claiming(
    QUEUE,
    RUNS.c.claim == bindparam("seen"),
    RUNS.c.status == bindparam("was"),
    claim=RUNS.c.claim + 1,
    started_at=func.coalesce(RUNS.c.started_at, QUEUE.param("now", "started_at")),
    released=False,
)


def claim(session: Session, run_id: int, *, now: datetime, lease_seconds: float) -> Claimed | None:
    """Take the run: queued, or running with its lease run out or let go (C11). A run taken
    back from a worker that did not let go blames its first pending item for that worker's
    end; an item blamed KILLS times fails with internal_error and the run goes on."""
    connection = session.connection()
    run = connection.execute(select(RUNS).where(RUNS.c.id == run_id)).one_or_none()
    if run is None or run.status not in (QUEUE.waiting, QUEUE.held):
        return None
    lease = now + timedelta(seconds=lease_seconds)
    params = {"entry": run_id, "now": now, "lease": lease, "seen": run.claim, "was": run.status}
    if leases.changed(connection, _CLAIM, params) != 1:
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
        _blame(connection, held, lease)
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


def _count(connection: Connection, run: Claimed, outcome: str, lease_until: datetime) -> None:
    """Move the counts, renewing the lease, only while this worker holds the running run:
    otherwise the item's transaction is rolled back (`Lost`)."""
    params = {**holder(run), "lease": lease_until}
    if leases.changed(connection, _COUNTS[outcome], params) != 1:
        raise Lost(run.id)


@dataclass(frozen=True)
class Outcome:
    outcome: str
    job_id: int | None
    errors: list[FieldError]
    warnings: list[dict[str, Any]]
    changes: list[dict[str, Any]] = field(default_factory=list)  # an update's (C11)


def apply_job(
    session: Session, employer: Employer, body: dict[str, Any], *, today: date, dry_run: bool
) -> Outcome:
    """One item, applied exactly as PUT /jobs with that body would be (C11), by the same
    domain function; a dry run writes nothing and names no job it would create."""
    applied = jobs.apply(session, employer, body, today=today, dry_run=dry_run, whole=True)
    job_id = applied.job.id or None  # 0: a job a dry run would create
    return Outcome(
        applied.outcome,
        job_id,
        [],
        [w.as_dict() for w in applied.warnings],
        changes_of(applied.stored, applied.job, employer.name),
    )


def changes_of(
    stored: StoredJob | None, written: StoredJob, employer_name: str
) -> list[dict[str, Any]]:
    """An item's `changes` (C11): what its update changed, or its dry run's would, as a
    dry run's answer lists them (C10); none for a create or an unchanged job."""
    return payloads.installed().changes(stored, written, employer_name) if stored else []


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
        "new_changes": orjson.dumps(done.changes).decode() if done.changes else None,
    }
    if connection.dialect.name == "postgresql":
        params.update(holder(run), lease=lease_until)
        if connection.execute(_RECORD_AND_COUNT[done.outcome], params).rowcount != 1:
            raise Lost(run.id)
        return
    connection.execute(RECORD, params)
    _count(connection, run, done.outcome, lease_until)


def failed(errors: list[FieldError], job_id: int | None = None) -> Outcome:
    """A failed item's outcome: `job_id` the job its referenceId names, if one exists (C11)."""
    return Outcome("failed", job_id, errors, [])


_LET_GO = holding(
    released=True,
    lease_until=QUEUE.param("at", "lease_until"),
    enqueued_at=QUEUE.param("at", "enqueued_at"),
)
_FINISH = holding(
    status="completed",
    finished_at=QUEUE.param("at", "finished_at"),
    lease_until=None,
    released=True,
    archived=bindparam("archived"),
)


def let_go(session: Session, run: Claimed, *, now: datetime) -> bool:
    """Hand the run on (a task's time is up): the next task takes it at once."""
    return leases.changed(session, _LET_GO, {**holder(run), "at": now}) == 1


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
        for i in range(0, len(ids), IN_CHUNK):
            gone = connection.execute(
                update(JOBS)
                .where(JOBS.c.id.in_(ids[i : i + IN_CHUNK]), JOBS.c.status == "active")
                .values(status="archived", version=JOBS.c.version + 1, updated_at=now)
                .returning(JOBS.c.id)
            )
            notifications.jobs_changed(connection, deleted=list(gone.scalars()), now=now)
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
    params = {**holder(run), "at": now, "archived": len(archived)}
    if leases.changed(connection, _FINISH, params) != 1:
        raise Lost(run.id)
    _completed(session, run, now=now)
    return len(archived)


def _completed(session: Session, run: Claimed, *, now: datetime) -> None:
    """The run's `sync.completed` event (C11, C12), its data the sync resource, written in
    the transaction that completes the run: once, and only if the run completes. None for a
    dry run. The webhook sweeper delivers it."""
    if run.dry_run:
        return
    resource = payloads.installed().sync_run(read_any(session.connection(), run.id))
    webhook_messages.emit(session, run.employer_id, "sync.completed", resource, now=now)


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
    settled = QUEUE.not_enqueued_since(now - timedelta(seconds=grace_seconds))
    which = leases.sweeping(QUEUE, and_(QUEUE.claimable(now), settled), None, None, enqueued_at=now)
    return sorted(connection.execute(which).scalars())


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Runs and their items SYNC_RETENTION_DAYS after they finished (C11); runs purged."""
    connection = session.connection()
    cutoff = now - timedelta(days=retention_days)
    old = select(RUNS.c.id).where(leases.finished_before(QUEUE, cutoff))
    ids = list(connection.execute(old).scalars())
    for i in range(0, len(ids), IN_CHUNK):
        chunk = ids[i : i + IN_CHUNK]
        connection.execute(delete(ITEMS).where(ITEMS.c.run_id.in_(chunk)))
        connection.execute(delete(RUNS).where(RUNS.c.id.in_(chunk)))
    return len(ids)


def counts_by_status(connection: Connection) -> dict[str, int]:
    """Runs by status, for jobpost_syncs{status} (C11)."""
    return leases.counts(connection, QUEUE)
