"""The change feed (C10): the employer's jobs changed, and those deleted, after a position,
oldest first."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    String,
    Text,
    bindparam,
    null,
    select,
    tuple_,
)

from models.db.entities import Job, JobLocation, Location
from models.db.fast_reads import Precompiled
from models.db.feed import Position
from models.jobs import tombstones
from models.jobs.listing import HEADER, PLACE, Header, headers_of
from models.jobs.search import fold_for_search, like_pattern
from models.jobs.tombstones import Deleted


@dataclass(frozen=True)
class Changes:
    jobs: list[Header | Deleted]  # in position order: (updatedAt or deletedAt, id)
    resume: Position  # where the next page starts: after the last job, or where this started


def changes(
    connection: Connection,
    employer_id: int,
    *,
    after: Position,
    until: datetime,
    q: str | None,
    status: str | None,
    limit: int,
) -> Changes:
    """The change feed (C10): the employer's jobs changed after `after`, by (updatedAt, id)
    ascending, up to `until` (the present less the lag: no transaction still open can commit
    a change stamped before it), at most `limit`. A job changed again later comes again.
    The deletions kept (`models.jobs.tombstones`) come in the same order, whatever `q` and
    `status`: a deleted job matches no filter, and a copy kept by one may hold it."""
    folded = fold_for_search(q) if q else ""
    params = {
        "employer_id": employer_id,
        "pattern": like_pattern(folded),
        "status": status,
        "at": after.at,
        "after_id": after.id,
        "until": until,
        "limit": limit,
    }
    rows = _feed_statement(bool(status), bool(folded)).all(connection, params)
    found = headers_of(rows)
    placed: list[tuple[datetime, int, Header | Deleted]] = [(j.updated_at, j.id, j) for j in found]
    gone = tombstones.after(connection, employer_id, after, until, limit)
    placed += [(d.deleted_at, d.id, d) for d in gone]
    placed.sort(key=lambda p: (p[0], p[1]))
    page = placed[:limit]
    resume = Position(page[-1][0], page[-1][1]) if page else after
    return Changes([item for _at, _id, item in page], resume)


_EMPTY = (null(), null(), null())  # the list's tally and matches


@functools.lru_cache(maxsize=8)
def _feed_statement(status: bool, search: bool) -> Precompiled:
    """The change feed's page (C10): the ids from the employer's (updated_at, id) index
    (migration 0009), after the position and not after `until`, then their headers and
    locations. Its rows are laid out as the list's, the tally's columns empty."""
    at = bindparam("at", type_=Job.updated_at.type)
    where = [
        Job.employer_id == bindparam("employer_id", type_=Integer),
        tuple_(Job.updated_at, Job.id) > tuple_(at, bindparam("after_id", type_=Integer)),
        Job.updated_at <= bindparam("until", type_=Job.updated_at.type),
    ]
    if status:
        where.append(Job.status == bindparam("status", type_=String))
    if search:
        where.append(Job.search_text.contains(bindparam("pattern", type_=Text), escape="/"))
    ids = select(Job.id).where(*where).order_by(Job.updated_at, Job.id)
    chosen = ids.limit(bindparam("limit", type_=Integer)).subquery("chosen")
    empty = _EMPTY
    statement: Any = (
        select(*empty, Job.id, *HEADER, *PLACE)
        .select_from(chosen)
        .join(Job, Job.id == chosen.c.id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .order_by(Job.updated_at, Job.id, JobLocation.position)
    )
    return Precompiled(statement)
