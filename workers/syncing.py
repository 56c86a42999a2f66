"""The worker's side of a sync run (C11): claim it, apply its items in order, a batch per
transaction (models.syncs.batches), then finish it; hand it on when the task's time is up.

One session (and its connection) serves the whole run. A batch that raises anything but a
rule's error is rolled back and its items applied one transaction each, as is a dry run, and
the first batch after taking a run back from a worker that died: that worker may have died
of one of them, and the item blamed for it (models.syncs.runs `claim`) must be that one.

Before each batch (each item, one at a time) the worker lets the writers waiting for the
database go first (models.db.engines `let_writers_in`): on SQLite, whose one write lock the
batches would otherwise take back to back, a cancel (C11) or any other write waits for the
batch in progress only, as it does on PostgreSQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import today_in, utcnow
from models.core.errors import DomainError, FieldError
from models.db.engines import let_writers_in
from models.db.entities import Employer
from models.jobs import rows as job_rows
from models.syncs import batches as sync_batches
from models.syncs import processing as sync_work
from workers.observability import SYNC_ITEMS

log = logging.getLogger("jobpost.syncs")

BATCH = 250  # pending items read, and applied, in one transaction
# A task applies items for at most this long, then hands the run to the next task: well
# inside Celery's time limit (workers.app.TASK_TIME_LIMIT) and the run's lease.
BUDGET_SECONDS = 150.0


def process(
    factory: sessionmaker[Session],
    run_id: int,
    *,
    lease_seconds: float,
    timezone: ZoneInfo,
    budget_seconds: float = BUDGET_SECONDS,
    now: Callable[[], datetime] = utcnow,
    hand_on: Callable[[int], object] | None = None,
) -> str:
    """Apply what is pending of run `run_id`, if this worker can claim it. Returns what
    became of it: completed, handed_on (time up; `hand_on` enqueues the next task), lost
    (cancelled, or taken by another worker), or not_claimed."""
    with _run_session(factory) as session:
        try:
            held = sync_work.claim(session, run_id, now=now(), lease_seconds=lease_seconds)
            session.commit()
            if held is None:
                return "not_claimed"
            with _planning(factory, held) as planner:
                return _apply_all(
                    session, held, lease_seconds, timezone, budget_seconds, now, hand_on, planner
                )
        except sync_work.Lost:
            session.rollback()
            return "lost"


@contextmanager
def _run_session(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One session on one connection for the whole task. On PostgreSQL its commits do not
    wait for the WAL flush (synchronous_commit off, this connection only): an item's commit
    would otherwise cost a disk flush, most of its time. A database crash can then lose the
    last moments of commits, each whole, job change and outcome together: those items are
    pending again and are applied once when the run resumes (C11: never half-applied)."""
    bind = factory.kw.get("bind")
    if not (isinstance(bind, Engine) and bind.dialect.name == "postgresql"):
        with factory() as session:  # SQLite's WAL commits are cheap; tests' sessions as given
            yield session
        return
    with bind.connect() as connection:
        connection.exec_driver_sql("SET synchronous_commit TO off")
        connection.commit()
        try:
            with factory(bind=connection) as session:
                yield session
        finally:
            if connection.in_transaction():
                connection.rollback()
            connection.exec_driver_sql("RESET synchronous_commit")  # before the pool has it
            connection.commit()


def _apply_all(
    session: Session,
    held: sync_work.Claimed,
    lease_seconds: float,
    timezone: ZoneInfo,
    budget_seconds: float,
    now: Callable[[], datetime],
    hand_on: Callable[[int], object] | None,
    planner: _Planner | None,
) -> str:
    employer = session.get(Employer, held.employer_id)
    assert employer is not None  # the run is the employer's, deleted with it
    lease = timedelta(seconds=lease_seconds)
    deadline = time.monotonic() + budget_seconds
    after = 0
    careful = held.dry_run or held.resumed
    planned: Future[Planned] | None = None
    while True:
        _writers_first(session)
        batch, prepared = _planner_result(planned, held)
        planned = None
        if batch is None:
            batch = sync_work.pending(session.connection(), held.id, after=after, limit=BATCH)
            session.commit()
        if not batch:
            sync_work.finish(session, held, now=now())
            session.commit()
            return "completed"
        today = today_in(timezone, now())  # the service date of the task's clock (C5)
        if careful or len(batch) == 1:
            for item in batch:
                if time.monotonic() > deadline:
                    return _hand_on(session, held, now(), hand_on)
                _writers_first(session)
                outcome = _apply_one(session, held, employer, item, today, now() + lease)
                SYNC_ITEMS.labels(outcome).inc()
                after = item.position
            careful = held.dry_run
            continue
        if time.monotonic() > deadline:
            return _hand_on(session, held, now(), hand_on)
        planned = planner.next(batch[-1].position, today) if planner else None
        if prepared is not None and prepared.today != today:
            prepared = None  # checked for the day before
        lease_until = now() + lease
        for outcome in _apply_batch(session, held, employer, batch, prepared, lease_until, today):
            SYNC_ITEMS.labels(outcome).inc()
        after = batch[-1].position


def _writers_first(session: Session) -> None:
    """Let the writers waiting for the database go before the next transaction (a cancel
    waits for the batch in progress only, C11); inside one, they wait for it anyway."""
    if not session.in_transaction():
        let_writers_in(session.get_bind())


def _apply_batch(
    session: Session,
    held: sync_work.Claimed,
    employer: Employer,
    batch: list[sync_work.Pending],
    prepared: sync_batches.Prepared | None,
    lease_until: datetime,
    today: date,
) -> list[str]:
    """The batch in one transaction, `prepared` by the planner if it was; if it raises
    anything but `Lost`, one per item."""
    try:
        if prepared is None:
            prepared = sync_batches.prepare(session, employer, batch, today=today)
        outcomes = sync_batches.apply_prepared(
            session, held, employer, prepared, lease_until=lease_until
        )
        session.commit()
        return outcomes
    except sync_work.Lost:
        raise
    except Exception:
        log.warning("sync run %s: a batch failed; its items one by one", held.id, exc_info=True)
        session.rollback()
    return [_apply_one(session, held, employer, item, today, lease_until) for item in batch]


Planned = tuple[list[sync_work.Pending], sync_batches.Prepared | None]


class _Planner:
    """Reads and checks the next batch (models.syncs.batches `prepare`) while the run's
    session writes this one: on PostgreSQL, in a thread and a session of its own. A batch's
    checks are the worker's CPU and its writes the database's; one after the other, each
    waited for the other. Only reads: what it decides the writing transaction relies on
    only where a PUT at that moment would (a referenceId is locked, and checked again, by
    the write)."""

    def __init__(self, factory: sessionmaker[Session], held: sync_work.Claimed) -> None:
        self._factory, self._held = factory, held
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sync-planner")
        self._session: Session | None = None  # the thread's own, made there

    def next(self, after: int, today: date) -> Future[Planned]:
        """The batch after position `after`, prepared for `today` (None: too small)."""
        return self._thread.submit(self._read, after, today)

    def _read(self, after: int, today: date) -> Planned:
        session = self._session = self._session or self._factory()
        try:
            batch = sync_work.pending(session.connection(), self._held.id, after=after, limit=BATCH)
            employer = session.get_one(Employer, self._held.employer_id)
            if len(batch) < 2:
                return batch, None
            return batch, sync_batches.prepare(session, employer, batch, today=today)
        finally:
            session.rollback()  # it wrote nothing; its snapshot ends

    def close(self) -> None:
        if self._session is not None:
            self._thread.submit(self._session.close).result()
        self._thread.shutdown(wait=True)


@contextmanager
def _planning(factory: sessionmaker[Session], held: sync_work.Claimed) -> Iterator[_Planner | None]:
    """A planner for the run's batches where a connection of its own reads beside the
    writing one (PostgreSQL sessions of an engine); SQLite, sessions given a connection
    (tests') and dry runs apply each batch as they read it."""
    bind = factory.kw.get("bind")
    if held.dry_run or not (isinstance(bind, Engine) and bind.dialect.name == "postgresql"):
        yield None
        return
    planner = _Planner(factory, held)
    try:
        yield planner
    finally:
        planner.close()


def _planner_result(
    planned: Future[Planned] | None, held: sync_work.Claimed
) -> Planned | tuple[None, None]:
    """What the planner read and checked; nothing if it failed (the caller reads it)."""
    if planned is None:
        return None, None
    try:
        return planned.result()
    except Exception:
        log.warning("sync run %s: planning a batch failed; read again", held.id, exc_info=True)
        return None, None


def _apply_one(
    session: Session,
    held: sync_work.Claimed,
    employer: Employer,
    item: sync_work.Pending,
    today: date,
    lease_until: datetime,
) -> str:
    """One item in one transaction: its job change and its outcome, or only its failure."""
    try:
        outcome = sync_work.apply_item(
            session, held, employer, item, today=today, lease_until=lease_until
        )
    except sync_work.Lost:
        raise
    except DomainError as e:
        session.rollback()
        _failed(session, held, employer, item, sync_batches.errors_of(e), lease_until)
        outcome = "failed"
    except Exception:
        log.exception("sync run %s: item %s failed", held.id, item.reference_id)
        session.rollback()
        error = FieldError("", "internal_error", "The job could not be applied.")
        _failed(session, held, employer, item, [error], lease_until)
        outcome = "failed"
    session.commit()
    return outcome


def _failed(
    session: Session,
    held: sync_work.Claimed,
    employer: Employer,
    item: sync_work.Pending,
    errors: list[FieldError],
    lease_until: datetime,
) -> None:
    """Record the item's failure, naming the job its referenceId names, if any (C11)."""
    connection = session.connection()
    job_id = job_rows.holder(connection, employer.id, item.reference_id)
    sync_work.record(connection, held, item, sync_work.failed(errors, job_id), lease_until)


def _hand_on(
    session: Session,
    held: sync_work.Claimed,
    moment: datetime,
    hand_on: Callable[[int], object] | None,
) -> str:
    if not sync_work.let_go(session, held, now=moment):
        session.rollback()
        return "lost"
    session.commit()
    if hand_on is not None:
        hand_on(held.id)  # if the broker is down, the sweeper finds the run let go
    return "handed_on"
