"""Webhook deliveries in the workers' hands (C12): claim under a lease, the retry schedule,
disabling endpoints, the sweeper, purge and the figures of the metrics.

The claim, lease, finishing marks, sweep, purge and figures are models.db.leases's, as for
the email outbox (models.applications.outbox); what stays here is the deliveries' own: the
caps, the retry schedule's step, and disabling endpoints. A pending delivery's `lease_until`
is when it was last enqueued, by the code that made it (`models.webhooks.messages.pending_of`),
a retry, the sweeper or a worker handing on (NULL: never, or no longer in the broker): the
sweeper leaves it alone for the grace period after, as the outbox's `enqueued_at` does; a
claim replaces it with the claim's own lease.

No tenant starves another: a claim is won only while the delivery's endpoint has fewer than
`endpoint_in_flight` deliveries `sending` under a live lease, and its employer fewer than
`employer_in_flight` across its endpoints. A delivery over a cap is deferred (left pending,
no attempt counted) and handed on by the worker whose attempt frees a place (`next_waiting`),
else by the sweeper. On PostgreSQL the claims of one employer take turns on an advisory lock
held to the end of the claim's one-statement transaction, so the caps hold across processes;
SQLite has one writer at a time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Integer,
    Row,
    String,
    and_,
    bindparam,
    delete,
    exists,
    func,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from models.db import leases
from models.webhooks.tables import DELIVERIES, ENDPOINTS, MESSAGES

D, E, M = DELIVERIES.c, ENDPOINTS.c, MESSAGES.c

DEFAULT_SCHEDULE = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
FINISHED = ("succeeded", "failed", "cancelled")
STATUSES = ("pending", "sending", "succeeded", "failed", "cancelled")
ENDPOINT_DISABLED = "endpoint disabled"
# A late outcome that changed nothing: the delivery was deleted with its endpoint, or its
# lease ran out and another worker claimed it.
LOST = "lost"
# A pending delivery's lease_until is when it was last enqueued (see above); due_at NULL is due.
QUEUE = leases.Queue(
    DELIVERIES,
    "id",
    STATUSES,
    FINISHED,
    due="due_at",
    due_nullable=True,
    enqueued="lease_until",
    finished_at="finished_at",
)


@dataclass(frozen=True)
class Timing(leases.Timing):
    """The leases, the retry schedule, when an endpoint is disabled, and the caps."""

    schedule: tuple[float, ...] = DEFAULT_SCHEDULE  # seconds before each retry
    jitter: float = 0.1  # each delay grows by up to this share, at random
    failing_days: float = 5  # failed deliveries and no success for this long: disabled
    endpoint_in_flight: int = 2  # deliveries `sending` at once to one endpoint
    employer_in_flight: int = 8  # … and to all of one employer's endpoints

    @property
    def retries(self) -> leases.Retries:
        return leases.Retries(schedule=self.schedule, floor=1.0, spread=self.jitter)


def _enabled(endpoint: Any) -> Any:
    return exists().where(E.id == endpoint, E.status == "enabled")


# The claim and the success, the steps every delivery takes, are built once: building and
# keying a statement cost more of a worker's CPU than running it (as models.applications.outbox
# found).
_DELIVERY: Any = bindparam("entry")
_NOW = QUEUE.param("now", "lease_until")
_BUSY = DELIVERIES.alias("busy")  # deliveries in flight, counted against the caps
_BUSY_AT = ENDPOINTS.alias("busy_at")
_OWN = ENDPOINTS.alias("own")  # the endpoint of the delivery claimed
# The states written out, not parameters: a generic plan must see that these conditions are
# those of the partial indexes of what is sending and what waits (migration 0027).
_SENDING = literal_column("'sending'", String)
_PENDING = literal_column("'pending'", String)
_IN_FLIGHT = and_(_BUSY.c.status == _SENDING, _BUSY.c.lease_until >= _NOW)


def _room(endpoint: Any) -> Any:
    """Whether `endpoint` (a column) and its employer are both under their caps."""
    at_endpoint = (
        select(func.count())
        .select_from(_BUSY)
        .where(_BUSY.c.endpoint_id == endpoint, _IN_FLIGHT)
        .scalar_subquery()
    )
    at_employer = (
        select(func.count())
        .select_from(
            _BUSY.join(_BUSY_AT, _BUSY_AT.c.id == _BUSY.c.endpoint_id).join(
                _OWN, _OWN.c.employer_id == _BUSY_AT.c.employer_id
            )
        )
        .where(_OWN.c.id == endpoint, _IN_FLIGHT)
        .scalar_subquery()
    )
    return and_(at_endpoint < bindparam("endpoint_cap"), at_employer < bindparam("employer_cap"))


# On PostgreSQL the caps are counted by `jobpost_webhook_room` (migration 0027), called in
# the claim's UPDATE: it takes the employer's turn (a transaction advisory lock) and then
# counts, each of its statements reading what the claims before it committed, where the
# UPDATE's own subqueries would read the snapshot taken before the lock. The claim is then one
# statement, and in a transaction of its own the turn ends with it, not a round trip later.
_ROOM_PG = func.jobpost_webhook_room(
    D.endpoint_id,
    _NOW,
    bindparam("endpoint_cap", type_=Integer),
    bindparam("employer_cap", type_=Integer),
    type_=Boolean,
)
_CLAIMED = (
    D.id,
    D.attempts,
    D.step,
    D.lease_until,
    D.endpoint_id,
    E.employer_id,
    M.message_id,
    M.type,
    M.payload,
    E.url,
    E.secret,
    E.previous_secret,
    E.previous_secret_until,
)
# PostgreSQL: claimed and read in one round trip (UPDATE … FROM … RETURNING). SQLite's
# RETURNING names the updated table only: there the claim, then a SELECT.
_CLAIM_AND_READ = leases.claiming(
    QUEUE,
    E.id == D.endpoint_id,
    E.status == "enabled",
    M.id == D.message_pk,
    _ROOM_PG,
).returning(*_CLAIMED)
_CLAIM_ONLY = leases.claiming(QUEUE, _enabled(D.endpoint_id), _room(D.endpoint_id))
_READ = (
    select(*_CLAIMED)
    .join(MESSAGES, M.id == D.message_pk)
    .join(ENDPOINTS, E.id == D.endpoint_id)
    .where(D.id == _DELIVERY)
)


def claim(session: Session, delivery_id: int, *, now: datetime, timing: Timing) -> Row[Any] | None:
    """pending (due) or sending (lease run out) → sending, with a lease and one attempt more,
    if its endpoint is enabled and it and its employer are under their caps; then the claimed
    delivery with its message and endpoint. None if not won: sent, finished, another
    worker's, its endpoint disabled or deleted, or a cap full (`defer` tells). Run it in a
    transaction of its own, committed at once (on PostgreSQL it holds the employer's turn):
    on PostgreSQL an autocommit session makes it one."""
    params = {
        "entry": delivery_id,
        "now": now,
        "lease": timing.lease_from(now),
        "endpoint_cap": timing.endpoint_in_flight,
        "employer_cap": timing.employer_in_flight,
    }
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        return connection.execute(_CLAIM_AND_READ, params).one_or_none()
    if connection.execute(_CLAIM_ONLY, params).rowcount != 1:
        return None
    return cast(Row[Any], connection.execute(_READ, params).one())


def defer(session: Session, delivery_id: int, *, now: datetime) -> bool:
    """After a claim not won: whether the delivery was due and its endpoint enabled, so that
    only a cap kept it. It stays pending, no attempt counted, marked as out of the broker
    (`lease_until` NULL) for `next_waiting` or the next sweep to enqueue again."""
    due = and_(D.id == delivery_id, QUEUE.is_due(now), _enabled(D.endpoint_id))
    return leases.changed(session, update(DELIVERIES).where(due).values(lease_until=None)) == 1


def next_waiting(
    session: Session, endpoint_id: int, *, now: datetime, timing: Timing
) -> int | None:
    """The delivery to enqueue when an attempt at `endpoint_id` ends and frees a place: the
    oldest due one, deferred or never enqueued, of the same employer (that endpoint's first)
    whose endpoint has room; marked enqueued. None when nothing waits."""
    employer = select(E.employer_id).where(E.id == endpoint_id).scalar_subquery()
    # The employer's endpoints with room first (a few, each counted once), then the oldest
    # delivery waiting at one of them: never a count for each waiting delivery.
    with_room = select(E.id).where(E.employer_id == employer, E.status == "enabled", _room(E.id))
    waiting = (
        select(D.id)
        .where(
            D.endpoint_id.in_(with_room),
            D.status == _PENDING,
            D.lease_until.is_(None),
            or_(D.due_at.is_(None), D.due_at <= _NOW),
        )
        .order_by((D.endpoint_id != endpoint_id), D.id)
        .limit(1)
    )
    params = {
        "now": now,
        "endpoint_cap": timing.endpoint_in_flight,
        "employer_cap": timing.employer_in_flight,
    }
    found = session.execute(waiting, params).scalar_one_or_none()
    if found is None:
        return None
    mine = and_(D.id == found, D.status == "pending", D.lease_until.is_(None))
    taken = leases.changed(session, update(DELIVERIES).where(mine).values(lease_until=now))
    return int(found) if taken == 1 else None


def _finish(session: Session, claimed: Row[Any], **values: object) -> bool:
    """sending → another state, under this claim's own lease only: a worker whose lease ran
    out, and whose delivery another has claimed since, changes nothing."""
    params = {"entry": claimed.id, "token": claimed.lease_until}
    return leases.changed(session, leases.as_holder(QUEUE, **values), params) == 1


_WAITER = DELIVERIES.alias("waiter")
_WAITER_AT = ENDPOINTS.alias("waiter_at")
# Whether a delivery of the claim's employer waits for a place, as `next_waiting` finds them:
# read in the mark's own statement on PostgreSQL, so that an attempt with nothing waiting
# behind it spends no round trip on the hand-on. (SQLite's RETURNING drops the aliases'
# names: there the hand-on always looks.)
_WAITS = exists().where(
    _WAITER_AT.c.employer_id == bindparam("employer", type_=Integer),
    _WAITER_AT.c.status == "enabled",
    _WAITER.c.endpoint_id == _WAITER_AT.c.id,
    _WAITER.c.status == _PENDING,
    _WAITER.c.lease_until.is_(None),
    or_(_WAITER.c.due_at.is_(None), _WAITER.c.due_at <= _NOW),
)
_SUCCEEDED = leases.as_holder(
    QUEUE,
    status="succeeded",
    lease_until=None,
    due_at=None,
    last_status_code=bindparam("status_code"),
    last_error=None,
    delivered_at=_NOW,
    finished_at=_NOW,
)
_SUCCEEDED_AND_LOOK = _SUCCEEDED.returning(_WAITS)


def mark_succeeded(session: Session, claimed: Row[Any], *, status_code: int, now: datetime) -> bool:
    kept, _ = mark_succeeded_and_look(session, claimed, status_code=status_code, now=now)
    return kept


def mark_succeeded_and_look(
    session: Session, claimed: Row[Any], *, status_code: int, now: datetime
) -> tuple[bool, bool]:
    """`mark_succeeded`, and whether a delivery of the same employer then waits for a place:
    only then is `next_waiting` worth its round trip (on SQLite, taken to be so). (False,
    False) when not kept."""
    params = {
        "entry": claimed.id,
        "token": claimed.lease_until,
        "status_code": status_code,
        "now": now,
        "employer": claimed.employer_id,
    }
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        kept = leases.changed(connection, _SUCCEEDED, params) == 1
        return kept, kept
    waits = connection.execute(_SUCCEEDED_AND_LOOK, params).scalar_one_or_none()
    return waits is not None, bool(waits)


def mark_failed_attempt(
    session: Session,
    claimed: Row[Any],
    *,
    error: str,
    status_code: int | None,
    now: datetime,
    timing: Timing,
    rng: random.Random | None = None,
) -> str:
    """A failed attempt: "disabled" for a 410 (the endpoint with it, C12), "retry" while the
    schedule has a step left (due after its delay, jittered), else "failed"; the endpoint is
    then disabled if it has been failing for `failing_days`. A delivery whose endpoint was
    disabled meanwhile fails at once. LOST when this claim no longer holds the delivery."""
    error = error[:2000]
    if status_code == 410:
        _finish(
            session,
            claimed,
            status="failed",
            lease_until=None,
            due_at=None,
            last_status_code=410,
            last_error=f"{error}: {ENDPOINT_DISABLED}",
            finished_at=now,
        )
        disable_endpoint(session, claimed.endpoint_id, reason="the receiver answered 410", now=now)
        return "disabled"
    enabled = session.scalar(select(_enabled(claimed.endpoint_id)))
    delay = leases.backoff(claimed.step, timing.retries, rng) if enabled else None
    if delay is not None:
        kept = _finish(
            session,
            claimed,
            status="pending",
            step=claimed.step + 1,
            due_at=now + timedelta(seconds=delay),
            lease_until=None,
            last_status_code=status_code,
            last_error=error,
        )
        return "retry" if kept else LOST
    kept = _finish(
        session,
        claimed,
        status="failed",
        lease_until=None,
        due_at=None,
        last_status_code=status_code,
        last_error=error if enabled else f"{error}: {ENDPOINT_DISABLED}",
        finished_at=now,
    )
    if not kept:
        return LOST
    disable_failing(session, now=now, timing=timing, endpoint_id=claimed.endpoint_id)
    return "failed"


def disable_endpoint(session: Session, endpoint_id: int, *, reason: str, now: datetime) -> bool:
    """Disable an enabled endpoint, and fail its pending deliveries: events while it is
    disabled make none (C12). Deliveries in flight finish as they go."""
    done = leases.changed(
        session,
        update(ENDPOINTS)
        .where(E.id == endpoint_id, E.status == "enabled")
        .values(status="disabled", disabled_reason=reason, updated_at=now),
    )
    if done != 1:
        return False
    session.execute(
        update(DELIVERIES)
        .where(D.endpoint_id == endpoint_id, D.status == "pending")
        .values(
            status="failed",
            lease_until=None,
            due_at=None,
            last_error=ENDPOINT_DISABLED,
            finished_at=now,
        )
    )
    return True


def disable_failing(
    session: Session, *, now: datetime, timing: Timing, endpoint_id: int | None = None
) -> list[int]:
    """Enabled endpoints (one, or all) with failed deliveries and no successful one for
    `failing_days`, and unchanged that long (a re-enabled endpoint gets its days anew; so
    does one just edited): disabled, their pending deliveries failed (C12)."""
    since = now - timedelta(days=timing.failing_days)
    succeeded = exists().where(
        D.endpoint_id == E.id, D.status == "succeeded", D.delivered_at >= since
    )
    failed = exists().where(
        D.endpoint_id == E.id, D.status == "failed", D.last_error != ENDPOINT_DISABLED
    )
    failing = select(E.id).where(
        E.status == "enabled", E.created_at <= since, E.updated_at <= since, failed, ~succeeded
    )
    if endpoint_id is not None:
        failing = failing.where(E.id == endpoint_id)
    ids = list(session.scalars(failing))
    reason = f"failed deliveries and no success for {timing.failing_days:g} days"
    return [i for i in ids if disable_endpoint(session, i, reason=reason, now=now)]


def sweep(session: Session, *, now: datetime, timing: Timing, limit: int = 1000) -> list[int]:
    """Deliveries to enqueue now (C12): pending and due, and not enqueued within the grace;
    or left `sending` past their lease (a worker died mid-send), which become pending again.
    Each is marked enqueued (`lease_until` = now) so the next sweeps leave it be for a while."""
    grace = timing.grace_before(now)
    # Enqueued at the grace's very end is due again (`<=`), where the outbox waits a tick more.
    due = and_(QUEUE.is_due(now), or_(D.lease_until.is_(None), D.lease_until <= grace))
    lost = QUEUE.lapsed(now)
    found: list[int] = []
    for which, values in ((lost, {"status": "pending", "due_at": now}), (due, {})):
        statement = leases.sweeping(QUEUE, which, D.due_at, limit, lease_until=now, **values)
        found.extend(session.scalars(statement))
    return sorted(set(found))


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Finished deliveries older than the retention, then the messages none refers to that
    are that old (C12). Returns the deliveries deleted."""
    cutoff = now - timedelta(days=retention_days)
    gone = leases.changed(session, leases.purging(QUEUE, cutoff))
    session.execute(
        delete(MESSAGES).where(M.created_at < cutoff, ~exists().where(D.message_pk == M.id))
    )
    return int(gone)


def retry_failed(
    session: Session, endpoint_id: int, message_id: str | None, *, now: datetime
) -> list[int]:
    """Failed deliveries of an endpoint (one message's, or all) sent again with the whole
    schedule anew; `attempts` keeps counting (C12), marked enqueued for the caller to enqueue.
    One statement: a delivery that is no longer failed is left as it is."""
    which = [D.endpoint_id == endpoint_id]
    if message_id is not None:
        named = select(M.id).where(M.message_id == message_id).scalar_subquery()
        which.append(D.message_pk.in_(named))
    retried = session.scalars(
        leases.retrying(QUEUE, *which, step=0, due_at=now, lease_until=now, finished_at=None)
    )
    return sorted(retried)


def counts(session: Session) -> dict[str, int]:
    return leases.counts(session, QUEUE)


def oldest_pending_age(session: Session, *, now: datetime) -> float:
    """Seconds since the oldest undelivered delivery was made (0 when none waits)."""
    oldest = select(func.min(D.created_at)).where(QUEUE.unfinished())
    return leases.oldest_age(session, oldest, now=now)
