"""The queue of search-engine notifications (C18): filled in the transaction of each write
that publishes, changes or withdraws a job page, emptied in batches by the workers.

Claims, leases, finishing marks and the purge are models.db.leases's, as for the outbox and
webhook deliveries; what stays here is the notifications' own: one row a page URL and a
channel, coalesced (a URL waiting is replaced by its newest kind: a page published then
deleted before a batch is sent once, as deleted), a day's requests counted against a quota,
and batches claimed under one lease.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Row, Table, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from models.core.dates import utcnow
from models.db import leases
from models.db.entities import SearchNotification, SearchNotificationDay
from models.notifications.channels import CHANNELS, installed, page_urls

NOTIFICATIONS = cast(Table, SearchNotification.__table__)
DAYS = cast(Table, SearchNotificationDay.__table__)
N, Q = NOTIFICATIONS.c, DAYS.c

UPDATED, DELETED = "URL_UPDATED", "URL_DELETED"
STATUSES = ("pending", "sending", "sent", "failed")
FINISHED = ("sent", "failed")
QUEUE = leases.Queue(NOTIFICATIONS, "id", STATUSES, FINISHED, finished_at="finished_at")
IN_CHUNK = 500  # URLs an IN (…) names at most


@dataclass(frozen=True)
class Timing(leases.Timing):
    """A batch's lease, and the retries of a batch the engine refused for now (429, 5xx)."""

    lease_seconds: float = 120
    retry_base_seconds: float = 60  # doubling, jittered, at most 6 hours
    max_attempts: int = 8  # then failed, recorded

    @property
    def retries(self) -> leases.Retries:
        return leases.Retries(base_seconds=self.retry_base_seconds, cap_seconds=6 * 3600)


def _connection(session: Session | Connection) -> Connection:
    return session.connection() if isinstance(session, Session) else session


def jobs_changed(
    session: Session | Connection,
    *,
    updated: Iterable[int] = (),
    deleted: Iterable[int] = (),
    now: datetime | None = None,
) -> int:
    """Queue `URL_UPDATED` for the pages of `updated` jobs (published, or changed while
    public) and `URL_DELETED` for `deleted` ones (no longer public), on every channel the
    process installed; none installed, nothing (C18). The rows queued."""
    channels = installed()
    wanted = [(UPDATED, i) for i in updated] + [(DELETED, i) for i in deleted]
    if not channels.on or not wanted:
        return 0
    at = now or utcnow()
    rows = [
        {
            "channel": channel,
            "url": url,
            "kind": kind,
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
        }
        for channel in channels.on
        for kind, job_id in wanted
        for url in page_urls(channels.base_url, job_id)
    ]
    connection = _connection(session)
    urls = sorted({str(row["url"]) for row in rows})
    for i in range(0, len(urls), IN_CHUNK):  # the newest kind replaces one still waiting
        connection.execute(
            delete(NOTIFICATIONS).where(
                N.status == "pending", N.url.in_(urls[i : i + IN_CHUNK]), N.attempts == 0
            )
        )
    connection.execute(insert(NOTIFICATIONS), rows)
    return len(rows)


def job_written(
    session: Session | Connection, job_id: int, *, was_public: bool, is_public: bool
) -> int:
    """A write of one job: its pages updated while public, deleted when it stops being."""
    if is_public:
        return jobs_changed(session, updated=[job_id])
    return jobs_changed(session, deleted=[job_id]) if was_public else 0


_CLAIM = leases.claiming(QUEUE)


def claim(
    session: Session, channel: str, *, now: datetime, limit: int, timing: Timing
) -> list[Row[Any]]:
    """At most `limit` due notifications of `channel` (oldest first; those whose lease ran
    out too) claimed under one lease: the rows won, with that lease as their token."""
    if limit <= 0:
        return []
    ids = list(
        session.scalars(
            select(N.id)
            .where(N.channel == channel, QUEUE.claimable(now))
            .order_by(N.next_attempt_at, N.id)
            .limit(limit)
        )
    )
    if not ids:
        return []
    lease = timing.lease_from(now)
    connection = session.connection()
    connection.execute(_CLAIM, [{"entry": i, "now": now, "lease": lease} for i in ids])
    won = select(N.id, N.url, N.kind, N.attempts, N.lease_until).where(
        N.id.in_(ids), N.status == "sending", N.lease_until == QUEUE.param("lease", "lease_until")
    )
    return cast(list[Row[Any]], list(connection.execute(won.order_by(N.id), {"lease": lease})))


def _as_holder(session: Session, rows: list[Row[Any]], values: dict[str, Any]) -> int:
    if not rows:
        return 0
    statement = leases.as_holder(QUEUE, **values)
    params = [{"entry": r.id, "token": r.lease_until} for r in rows]
    return leases.changed(session, statement, params)


def mark_sent(session: Session, rows: list[Row[Any]], *, status_code: int, now: datetime) -> int:
    values = {
        "status": "sent",
        "lease_until": None,
        "last_status_code": status_code,
        "last_error": None,
        "finished_at": now,
    }
    return _as_holder(session, rows, values)


def mark_refused(
    session: Session, rows: list[Row[Any]], *, status_code: int | None, error: str, now: datetime
) -> int:
    """Refused for good (a 4xx but 429): failed, with the answer recorded (C18)."""
    values = {
        "status": "failed",
        "lease_until": None,
        "last_status_code": status_code,
        "last_error": error[:2000],
        "finished_at": now,
    }
    return _as_holder(session, rows, values)


def mark_retry(
    session: Session,
    rows: list[Row[Any]],
    *,
    status_code: int | None,
    error: str,
    now: datetime,
    timing: Timing,
    rng: random.Random | None = None,
) -> dict[str, int]:
    """Not taken for now (429, 5xx, no answer): pending again after one backoff for the
    batch (by the attempts made: a batch is retried together), or failed once
    `max_attempts` are spent. How many of each."""
    found = {"retry": 0, "failed": 0}
    if not rows:
        return found
    attempts = max(row.attempts for row in rows)
    delay = leases.backoff(attempts - 1, timing.retries, rng)
    if attempts >= timing.max_attempts or delay is None:
        found["failed"] = mark_refused(session, rows, status_code=status_code, error=error, now=now)
        return found
    values = {
        "status": "pending",
        "lease_until": None,
        "next_attempt_at": now + timedelta(seconds=delay),
        "last_status_code": status_code,
        "last_error": error[:2000],
    }
    found["retry"] = _as_holder(session, rows, values)
    return found


def day_of(now: datetime) -> date:
    return now.astimezone(UTC).date()


def used_today(session: Session, channel: str, *, now: datetime) -> int:
    used = session.scalar(select(Q.requests).where(Q.channel == channel, Q.day == day_of(now)))
    return int(used or 0)


def reserve(session: Session, channel: str, wanted: int, *, quota: int, now: datetime) -> int:
    """Take up to `wanted` of the day's (UTC) requests of `channel`, counted before they are
    made: a crash after costs some of the quota, never more than it. The number granted."""
    day = day_of(now)
    granted = max(min(wanted, quota - used_today(session, channel, now=now)), 0)
    if granted == 0:
        return 0
    more = (
        update(DAYS)
        .where(Q.channel == channel, Q.day == day, Q.requests + granted <= quota)
        .values(requests=Q.requests + granted)
    )
    if leases.changed(session, more) == 1:
        return granted
    if used_today(session, channel, now=now) == 0:
        try:  # the day's first: a run at once that made it first wins, this one waits
            with session.begin_nested():
                session.execute(insert(DAYS).values(channel=channel, day=day, requests=granted))
        except IntegrityError:
            return 0
        return granted
    return 0


def give_back(session: Session, channel: str, unused: int, *, now: datetime) -> None:
    """Requests reserved but not made (fewer URLs were claimed than reserved)."""
    if unused > 0:
        session.execute(
            update(DAYS)
            .where(Q.channel == channel, Q.day == day_of(now))
            .values(requests=Q.requests - unused)
        )


def counts(session: Session | Connection) -> dict[str, dict[str, int]]:
    """Notifications by channel and status, every one named (0 for none): the metrics and
    `jobpost notifications`."""
    rows = _connection(session).execute(
        select(N.channel, N.status, func.count()).group_by(N.channel, N.status)
    )
    found = {(c, s): int(n) for c, s, n in rows}
    return {c: {s: found.get((c, s), 0) for s in STATUSES} for c in CHANNELS}


def pending(session: Session, channel: str, *, limit: int = 20) -> list[Row[Any]]:
    """The first waiting notifications of `channel`, oldest first, for the CLI."""
    waiting = and_(N.channel == channel, N.status.in_(("pending", "sending")))
    return cast(
        list[Row[Any]],
        session.execute(
            select(N.kind, N.url, N.attempts, N.next_attempt_at, N.last_status_code)
            .where(waiting)
            .order_by(N.next_attempt_at, N.id)
            .limit(limit)
        ).all(),
    )


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Finished notifications older than the retention, and the counts of days before it."""
    cutoff = now - timedelta(days=retention_days)
    gone = leases.changed(session, leases.purging(QUEUE, cutoff))
    session.execute(delete(DAYS).where(Q.day < day_of(cutoff)))
    return gone
