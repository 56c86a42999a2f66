"""The digests of job alerts (C19): which alerts get one, and which jobs it lists.

A job is new to an alert when it first became open after the alert's watermark
(`Job.opened_at` > `last_sent_at`). The planner reads openings only up to the change feed's
lag before now (`opened_until`): a job stamped earlier has committed (models.db.feed), so
every opening falls in exactly one digest's range (`opened_from`, `opened_until`], and the
watermark moves to the range's end only when that digest is sent (or finds its jobs
closed). A job closed and opened again keeps its first opening: it is never new twice.

Planning asks the jobs once per distinct stored search, not once per alert: the newest
opening among the open jobs of that search since the oldest watermark of its due alerts;
every due alert whose watermark is older has something new. The digests of a batch of
searches are queued by one INSERT … SELECT, so planning holds one batch of searches in memory
whatever their alerts, and reads the digests under way once a batch, not once a search.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session, sessionmaker

from models.alerts import filters as alert_filters
from models.applications import outbox
from models.db.entities import AlertSubscription, Job, UTCDateTime
from models.db.unit_of_work import after_commit, session_scope
from models.jobs import feeds
from models.jobs.feeds import OpenJob

_jobs = cast(Table, Job.__table__)
_subscriptions = cast(Table, AlertSubscription.__table__)
_mails = outbox.ALERT_MAILS
S, M, J = _subscriptions.c, _mails.c, _jobs.c

# Due again this long after the last digest (or the confirmation): an hour short of the
# period, so a run at the same time of day is never an hour too early for its alert.
DUE_AFTER = {"daily": timedelta(hours=23), "weekly": timedelta(days=7) - timedelta(hours=1)}
LISTED = 20  # jobs a digest lists; the rest are "N more", a link to the search
SEARCHES_PER_BATCH = 200  # distinct searches a planning transaction handles


# Written out, not parameters: a generic plan must see that this is the condition of the
# partial index of digests under way (migration 0023), or it reads every alert email for
# each alert it plans.
_UNDER_WAY = text("alert_mails.kind = 'digest' AND alert_mails.status IN ('pending', 'sending')")


def _due(now: datetime) -> ColumnElement[bool]:
    """Confirmed alerts whose period has passed and that have no digest under way."""
    under_way = exists().where(M.subscription_id == S.id, _UNDER_WAY)
    periods = [
        and_(S.frequency == frequency, S.last_sent_at <= now - after)
        for frequency, after in DUE_AFTER.items()
    ]
    return and_(S.state == "confirmed", or_(*periods), ~under_way)


def _at(value: datetime) -> Any:
    return literal(value, type_=UTCDateTime())


def _utc(value: Any) -> datetime | None:
    """A min() or max() of a time column: SQLite gives its text, without the column's type."""
    if value is None:
        return None
    found = datetime.fromisoformat(value) if isinstance(value, str) else value
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def newest_opening(
    connection: Connection, filters: str, *, since: datetime, until: datetime, today: date
) -> datetime | None:
    """The newest first opening in (since, until] among the open jobs of a stored search.
    Read down the open jobs' openings to the first that matches, not as `max()`, which
    PostgreSQL would compute over every opening in the range once a filter is a subquery."""
    where = alert_filters.from_query(filters).conditions(today)
    statement = (
        select(J.opened_at)
        .where(feeds.PUBLIC, J.opened_at > _at(since), J.opened_at <= _at(until), *where)
        .order_by(J.opened_at.desc())
        .limit(1)
    )
    return _utc(connection.execute(statement).scalar())


def _queue(
    session: Session, newest: dict[str, datetime], *, now: datetime, until: datetime
) -> list[int]:
    """A pending digest of (watermark, until] for each due alert of these searches with a
    job newer than its watermark (`newest`, by search); their ids."""
    if not newest:
        return []
    news = [and_(S.filters == filters, S.last_sent_at < _at(at)) for filters, at in newest.items()]
    chosen = select(
        S.id,
        literal("digest"),
        _at(now),
        literal("pending"),
        literal(0),
        _at(now),
        _at(now),  # enqueued by the planner itself, after its commit
        S.last_sent_at,
        _at(until),
    ).where(_due(now), or_(*news))
    columns = [
        "subscription_id",
        "kind",
        "created_at",
        "status",
        "attempts",
        "next_attempt_at",
        "enqueued_at",
        "opened_from",
        "opened_until",
    ]
    statement = insert(_mails).from_select(columns, chosen).returning(M.id)
    return [int(i) for i in session.scalars(statement)]


@dataclass(frozen=True)
class Planned:
    searches: int  # distinct searches of due alerts, each asked once
    queued: int  # digests queued


def plan_batch(
    session: Session,
    *,
    now: datetime,
    today: date,
    lag_seconds: float,
    after: str | None = None,
    limit: int = SEARCHES_PER_BATCH,
) -> tuple[list[str], list[int]]:
    """The next `limit` distinct searches of due alerts (by their text, after `after`), and
    the digests queued for them."""
    until = now - timedelta(seconds=lag_seconds)
    searches = (
        select(S.filters, func.min(S.last_sent_at))
        .where(_due(now))
        .group_by(S.filters)
        .order_by(S.filters)
        .limit(limit)
    )
    if after is not None:
        searches = searches.where(S.filters > after)
    rows = session.execute(searches).all()
    newest: dict[str, datetime] = {}
    connection = session.connection()
    for filters, oldest in rows:
        since = _utc(oldest)
        if since is None or since >= until:
            continue
        found = newest_opening(connection, filters, since=since, until=until, today=today)
        if found is not None:
            newest[filters] = found
    return [row[0] for row in rows], _queue(session, newest, now=now, until=until)


def plan(
    factory: sessionmaker[Session],
    *,
    now: datetime,
    today: date,
    lag_seconds: float,
    hand_on: Callable[[list[int]], object] = lambda ids: None,
    limit: int = SEARCHES_PER_BATCH,
) -> Planned:
    """Every due alert with something new gets one pending digest, in transactions of at
    most `limit` searches; `hand_on` gets each transaction's digests once it has committed
    (to enqueue them: the sweep would take 1,000 a minute). Running it again queues
    nothing more: an alert with a digest under way is not due."""
    after: str | None = None
    searches = queued = 0
    while True:
        with session_scope(factory) as session:
            done, ids = plan_batch(
                session, now=now, today=today, lag_seconds=lag_seconds, after=after, limit=limit
            )
            after_commit(session, functools.partial(hand_on, ids))
        searches, queued = searches + len(done), queued + len(ids)
        if len(done) < limit:
            return Planned(searches, queued)
        after = done[-1]


@dataclass(frozen=True)
class Contents:
    """What a digest lists: its first LISTED jobs, newest first, and how many it has."""

    jobs: list[OpenJob]
    total: int


def contents(connection: Connection, row: Any, *, today: date) -> Contents:
    """The jobs of a claimed digest as they are now: open, of its search, first opened in its
    range; a job closed since the planning is left out."""
    where = [
        *alert_filters.from_query(row.filters).conditions(today),
        J.opened_at > _at(row.opened_from),
        J.opened_at <= _at(row.opened_until),
    ]
    listed = feeds.read_jobs(connection, where, [J.opened_at.desc(), J.id.desc()], LISTED)
    if len(listed) < LISTED:
        return Contents(listed, len(listed))
    counted = select(func.count()).select_from(_jobs).where(feeds.PUBLIC, *where)
    total = connection.execute(counted).scalar_one()
    return Contents(listed, int(total))


def move_watermark(session: Session, subscription_id: int, until: datetime) -> None:
    """The alert's next digest starts where this one ended (forward only)."""
    session.execute(
        update(_subscriptions)
        .where(S.id == subscription_id, S.last_sent_at < _at(until))
        .values(last_sent_at=until)
    )
