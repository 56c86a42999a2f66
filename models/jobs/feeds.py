"""The open jobs as the sitemaps read them (C15): the public set (active, not taken down, as
the job page shows them), a stamp of an id range for the validators, and its jobs read in
keyset batches by id, so a sitemap of any size is read in bounded memory and a job that stays
open is never skipped or read twice while others come and go."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import (
    Connection,
    Table,
    and_,
    case,
    false,
    func,
    select,
)

from models.db.entities import Job

_jobs = cast(Table, Job.__table__)

BATCH = 500  # jobs a statement reads: what a sitemap holds in memory at once
PUBLIC = and_(_jobs.c.status == "active", _jobs.c.taken_down == false())


@dataclass(frozen=True)
class Stamp:
    """What changes whenever the open jobs or one of them does: their count, a number that
    every change raises (`changes`), and the latest change of any job (archiving and taking
    down stamp it too; a deletion moves the count and `changes` only)."""

    count: int
    changes: int
    latest: datetime | None


def range_stamp(connection: Connection, low: int, high: int) -> Stamp:
    """The stamp of the jobs whose id is in (low, high] (a sitemap chunk): one statement over
    those jobs, `changes` the sum of the open ones' versions (every write raises a job's)."""
    is_public = case((PUBLIC, 1), else_=0)
    statement = select(
        func.coalesce(func.sum(is_public), 0),
        func.coalesce(func.sum(is_public * _jobs.c.version), 0),
        func.max(_jobs.c.updated_at),
    ).where(_jobs.c.id > low, _jobs.c.id <= high)
    count, versions, latest = connection.execute(statement).one()
    return Stamp(int(count), int(versions), latest)


@dataclass(frozen=True)
class Chunk:
    """A sitemap chunk: the jobs whose id is in ((number - 1) × size, number × size]."""

    number: int
    latest: datetime


def chunks(connection: Connection, size: int) -> list[Chunk]:
    """The chunks that hold an open job, with the latest change of any job in each (a job
    archived there moves it too). By id range, so a job's chunk never changes."""
    number = ((_jobs.c.id - 1) // size + 1).label("number")
    statement = (
        select(number, func.max(_jobs.c.updated_at))
        .group_by(number)
        .having(func.sum(case((PUBLIC, 1), else_=0)) > 0)
        .order_by(number)
    )
    return [Chunk(int(n), at) for n, at in connection.execute(statement)]


def page_stamps(
    connection: Connection, low: int, high: int
) -> Iterator[list[tuple[int, datetime]]]:
    """The open jobs' (id, updatedAt) with ids in (low, high], by id, BATCH at a time."""
    after, batch = low, BATCH
    while True:
        statement = (
            select(_jobs.c.id, _jobs.c.updated_at)
            .where(PUBLIC, _jobs.c.id > after, _jobs.c.id <= high)
            .order_by(_jobs.c.id)
            .limit(batch)
        )
        rows = [(int(i), at) for i, at in connection.execute(statement)]
        if not rows:
            return
        yield rows
        after = rows[-1][0]
        if len(rows) < batch:
            return
