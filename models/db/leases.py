"""Leased work, written once (C8, C11, C12): the state machine the mail outbox, webhook
deliveries and sync runs share.

An entry waits (`pending`, `queued`), is claimed under a lease by one worker (`sending`,
`running`), and finishes, or waits again for a retry. Every transition is one conditional
UPDATE, so it behaves the same on SQLite and PostgreSQL and holds no lock while a worker
talks to a relay or a receiver; a finishing mark names the claim it expects, so a worker
whose lease ran out, and whose entry another has claimed since, changes nothing. A `Queue`
names a table's columns for these statements; each module builds its statements once, at
import (building and keying one costs more than running it), and keeps its own steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Delete,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Timing:
    """How long a claim holds, and how long the sweeper trusts a message in the broker."""

    lease_seconds: float = 300
    sweep_grace_seconds: float = 120

    def lease_from(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)

    def grace_before(self, now: datetime) -> datetime:
        return now - timedelta(seconds=self.sweep_grace_seconds)


@dataclass(frozen=True)
class Retries:
    """When a failed attempt is tried again: `schedule[step]` seconds later while the
    schedule lasts, or without one `base_seconds`·2^step (at most `cap_seconds`); each delay
    times `floor` + `spread`·(a random share), so that retries do not come in herds."""

    schedule: tuple[float, ...] | None = None
    base_seconds: float = 60
    cap_seconds: float = 6 * 3600
    floor: float = 0.5
    spread: float = 0.5


def backoff(step: int, retries: Retries, rng: random.Random | None = None) -> float | None:
    """Seconds before the retry after `step` earlier ones; None once the schedule is spent."""
    if retries.schedule is not None:
        if step >= len(retries.schedule):
            return None
        delay = retries.schedule[step]
    else:
        delay = min(retries.base_seconds * 2**step, retries.cap_seconds)
    share: float = (rng or random).random()
    return float(delay * (retries.floor + retries.spread * share))


@dataclass(frozen=True)
class Queue:
    """A table of leased work: the column naming an entry, its statuses, and its times.

    `due` is when a waiting entry may be claimed (None: at once; NULL in it, with
    `due_nullable`, too). `token` is the column a finishing mark compares with the claim's
    own: the lease where each claim sets a new one, else a claim number. `let_go`, a flag a
    holder sets to hand its entry on at once. `enqueued`, when the sweeper last sent it.
    `attempts` counts the claims (None: the table keeps no such count)."""

    table: Table
    key: str
    statuses: tuple[str, ...]
    finished: tuple[str, ...]
    waiting: str = "pending"
    held: str = "sending"
    failed: str = "failed"
    due: str | None = "next_attempt_at"
    due_nullable: bool = False
    lease: str = "lease_until"
    attempts: str | None = "attempts"
    token: str = "lease_until"
    let_go: str | None = None
    enqueued: str = "enqueued_at"
    finished_at: str | None = None  # when it finished, for a purge

    def column(self, name: str) -> ColumnElement[Any]:
        column: ColumnElement[Any] = self.table.c[name]
        return column

    def param(self, name: str, column: str) -> BindParameter[Any]:
        """A bound value typed as `column` (UTC datetimes: the column's own conversion)."""
        return bindparam(name, type_=self.column(column).type)

    def entry(self) -> ColumnElement[bool]:
        return self.column(self.key) == bindparam("entry")

    def status_is(self, status: str) -> ColumnElement[bool]:
        return self.column("status") == status

    def is_due(self, now: Any) -> ColumnElement[bool]:
        """Waiting, and its time has come."""
        waiting = self.status_is(self.waiting)
        if self.due is None:
            return waiting
        due = self.column(self.due)
        if self.due_nullable:
            return and_(waiting, or_(due.is_(None), due <= now))
        return and_(waiting, due <= now)

    def lapsed(self, now: Any) -> ColumnElement[bool]:
        """Held, but no longer: the lease ran out (or its holder let go)."""
        lease = self.column(self.lease)
        if self.let_go is None:
            return and_(self.status_is(self.held), lease < now)
        let_go = or_(self.column(self.let_go).is_(True), lease.is_(None), lease < now)
        return and_(self.status_is(self.held), let_go)

    def claimable(self, now: Any) -> ColumnElement[bool]:
        return or_(self.is_due(now), self.lapsed(now))

    def unfinished(self) -> ColumnElement[bool]:
        return self.column("status").in_((self.waiting, self.held))

    def not_enqueued_since(self, cutoff: Any) -> ColumnElement[bool]:
        """Not sent to the broker since `cutoff`: a message may have been lost."""
        enqueued = self.column(self.enqueued)
        return or_(enqueued.is_(None), enqueued < cutoff)

    def held_by(self) -> ColumnElement[bool]:
        """The entry bound as `entry`, still held under the claim bound as `token`."""
        token = self.column(self.token)
        mine = token == self.param("token", self.token)
        return and_(self.entry(), self.status_is(self.held), mine)


def claiming(queue: Queue, *where: ColumnElement[bool], **values: Any) -> Update:
    """Due (or its lease run out) → held, with the lease bound as `lease` and one attempt
    more, for the entry bound as `entry` at the time bound as `now`, if `where` holds too."""
    now = queue.param("now", queue.lease)
    counted = {} if queue.attempts is None else {queue.attempts: queue.column(queue.attempts) + 1}
    return (
        update(queue.table)
        .where(queue.entry(), queue.claimable(now), *where)
        .values(
            {
                "status": queue.held,
                **counted,
                queue.lease: queue.param("lease", queue.lease),
                **values,
            }
        )
    )


def as_holder(queue: Queue, **values: Any) -> Update:
    """The held entry bound as `entry` → `values` (finished, waiting again, its lease
    renewed), under the claim bound as `token` only: a late holder changes nothing."""
    return update(queue.table).where(queue.held_by()).values(**values)


def sweeping(
    queue: Queue, which: ColumnElement[bool], order_by: Any, limit: int | None, **values: Any
) -> Update:
    """`which` entries (the first `limit` by `order_by`) → `values`, returning their keys.
    One statement: a sweep overlapping another waits on its row locks, then finds those
    rows no longer due (just enqueued) and leaves them alone."""
    key = queue.column(queue.key)
    statement = update(queue.table).where(which)
    if limit is not None:
        batch = select(key).where(which).order_by(order_by).limit(limit)
        statement = statement.where(key.in_(batch.scalar_subquery()))
    return statement.values(**values).returning(key)


def retrying(queue: Queue, *where: ColumnElement[bool], **values: Any) -> Update:
    """Failed entries (as `where` narrows them) waiting again, returning their keys. One
    statement: an entry no longer failed (taken meanwhile) is left as it is."""
    key = queue.column(queue.key)
    statement = update(queue.table).where(queue.status_is(queue.failed), *where)
    return statement.values(status=queue.waiting, **values).returning(key)


def finished_before(queue: Queue, cutoff: datetime) -> ColumnElement[bool]:
    """Finished entries older than `cutoff`: what a purge deletes."""
    if queue.finished_at is None:
        raise ValueError(f"{queue.table.name} keeps no time its entries finished")
    status = queue.column("status")
    return and_(status.in_(queue.finished), queue.column(queue.finished_at) < cutoff)


def purging(queue: Queue, cutoff: datetime) -> Delete:
    return delete(queue.table).where(finished_before(queue, cutoff))


def changed(session: Session | Connection, statement: Any, params: Any = None) -> int:
    """Rows an UPDATE or DELETE changed (on the session's connection: a CursorResult)."""
    connection = session.connection() if isinstance(session, Session) else session
    return int(connection.execute(statement, params).rowcount)


def counts(session: Session | Connection, queue: Queue) -> dict[str, int]:
    """Entries by status, every status named (0 for none), for the metrics."""
    status = queue.column("status")
    rows = session.execute(select(status, func.count()).group_by(status))
    found = {status: int(n) for status, n in rows}
    return {s: found.get(s, 0) for s in queue.statuses}


def oldest_age(session: Session, oldest: Select[Any], *, now: datetime) -> float:
    """Seconds since the time `oldest` selects (a min over unfinished work; 0 for none)."""
    at = session.scalar(oldest)
    if at is None:
        return 0.0
    if at.tzinfo is None:  # min() bypasses the column type on SQLite
        at = at.replace(tzinfo=UTC)
    age: float = (now - at).total_seconds()
    return max(age, 0.0)
