"""Deleted jobs as the change feed tells of them (C10): written in the DELETE's transaction,
read beside the jobs in position order, purged after CHANGE_FEED_TOMBSTONE_DAYS."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Integer, Table, bindparam, delete, insert, select, tuple_
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from models.db import feed
from models.db.entities import JobTombstone
from models.db.fast_reads import Precompiled

_tombstones = cast(Table, JobTombstone.__table__)
DEFAULT_DAYS = 30  # CHANGE_FEED_TOMBSTONE_DAYS (C14)


@dataclass(frozen=True, slots=True)
class Deleted:
    """A job deleted at `deleted_at`: its place in the feed is (deleted_at, id)."""

    id: int
    reference_id: str | None
    deleted_at: datetime


def record(session: Session, employer_id: int, job_id: int, reference_id: str | None) -> Deleted:
    """Note the job just deleted, stamped after the DELETE's wait for the job's lock as any
    change is (`models.db.feed.stamp`), so the commit's lag check covers it."""
    at = feed.stamp(session)
    session.connection().execute(
        insert(_tombstones).values(
            employer_id=employer_id, job_id=job_id, reference_id=reference_id, deleted_at=at
        )
    )
    return Deleted(job_id, reference_id, at)


def after(
    connection: Connection, employer_id: int, position: feed.Position, until: datetime, limit: int
) -> list[Deleted]:
    """The employer's deletions after `position`, not after `until`, oldest first, at most
    `limit`."""
    params = {
        "employer_id": employer_id,
        "at": position.at,
        "after_id": position.id,
        "until": until,
        "limit": limit,
    }
    return [Deleted(int(i), ref, at) for i, ref, at in _after().all(connection, params)]


@functools.cache
def _after() -> Precompiled:
    t = _tombstones.c
    at = bindparam("at", type_=t.deleted_at.type)
    statement: Any = (
        select(t.job_id, t.reference_id, t.deleted_at)
        .where(
            t.employer_id == bindparam("employer_id", type_=Integer),
            tuple_(t.deleted_at, t.job_id) > tuple_(at, bindparam("after_id", type_=Integer)),
            t.deleted_at <= bindparam("until", type_=t.deleted_at.type),
        )
        .order_by(t.deleted_at, t.job_id)
        .limit(bindparam("limit", type_=Integer))
    )
    return Precompiled(statement)


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Delete the tombstones older than `retention_days` (the daily purge, C14)."""
    result = session.execute(
        delete(JobTombstone)
        .where(JobTombstone.deleted_at < now - timedelta(days=retention_days))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
