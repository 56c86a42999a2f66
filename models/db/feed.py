"""The change feeds (C10): their positions, and what lets a reader trust the lag.

A feed shows a change only once its time is CHANGE_FEED_LAG_SECONDS in the past. That misses
nothing only if no transaction commits a change stamped longer ago than the lag: a reader
would have passed its time before it could see it. So every change is stamped with `stamp`
(as late as its transaction allows: after the locks it waits for), and the session checks
at commit that the oldest stamp it holds is younger than half the lag; an older one rolls
the transaction back (`ChangeTooSlow`), leaving the other half of the lag to COMMIT itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import event
from sqlalchemy.orm import Session

from models.core.dates import utcnow

DEFAULT_LAG_SECONDS = 5.0  # CHANGE_FEED_LAG_SECONDS (C14)
LAG = "jobpost.change_feed_lag"  # in a sessionmaker's `info`: the lag in seconds
_OLDEST = "jobpost.oldest_stamp"  # in a session's `info`: its transaction's oldest stamp


@dataclass(frozen=True)
class Position:
    """A place in a change feed: after the thing changed (or received) at `at` whose id is
    `id`, in the order of (time, id)."""

    at: datetime
    id: int


class ChangeTooSlow(Exception):
    """A transaction took too long between stamping a change and committing it: committed,
    a feed reader could already have passed the change's time (C10)."""


def stamp(session: Session) -> datetime:
    """The time of a change made in `session`'s transaction, noted for the check at commit."""
    now = utcnow()
    session.info.setdefault(_OLDEST, now)
    return now


def lag_of(session: Session) -> float:
    return float(session.info.get(LAG, DEFAULT_LAG_SECONDS))


@event.listens_for(Session, "before_commit")
def _check(session: Session) -> None:
    oldest = session.info.pop(_OLDEST, None)
    if oldest is not None and utcnow() - oldest > timedelta(seconds=lag_of(session) / 2):
        raise ChangeTooSlow(
            f"a change stamped at {oldest.isoformat()} was about to commit past half of "
            f"CHANGE_FEED_LAG_SECONDS ({lag_of(session):g} s)"
        )


@event.listens_for(Session, "after_rollback")
def _forget(session: Session) -> None:
    session.info.pop(_OLDEST, None)
