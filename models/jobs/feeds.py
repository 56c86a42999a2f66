"""The open jobs as the sitemaps and feeds read them (C15): the public set (active, not taken
down, as the job page shows them), a cheap stamp of it for the validators, and its jobs read
in keyset batches by id, so a feed of any size is read in bounded memory and a job that stays
open is never skipped or read twice while others come and go."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    case,
    exists,
    false,
    func,
    select,
)

from models.db.entities import Employer, Job, JobCategory, JobLocation, JobTally, Location
from models.jobs.search import fold_for_search, like_pattern

_jobs = cast(Table, Job.__table__)
_employers = cast(Table, Employer.__table__)
_job_locations = cast(Table, JobLocation.__table__)
_job_categories = cast(Table, JobCategory.__table__)
_locations = cast(Table, Location.__table__)
_tallies = cast(Table, JobTally.__table__)

BATCH = 500  # jobs a statement reads: what a feed holds in memory at once
PUBLIC = and_(_jobs.c.status == "active", _jobs.c.taken_down == false())


@dataclass(frozen=True)
class Filters:
    """What the Atom feed narrows the open jobs by (C15): `q` as the API's (C6), a category
    id, a province code."""

    q: str | None = None
    category: int | None = None
    province: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = []
        if self.q:
            pattern = like_pattern(fold_for_search(self.q))
            where.append(_jobs.c.search_text.contains(pattern, escape="/"))
        if self.category is not None:
            where.append(
                exists().where(
                    _job_categories.c.job_id == _jobs.c.id,
                    _job_categories.c.category_id == self.category,
                )
            )
        if self.province is not None:
            where.append(
                exists().where(
                    _job_locations.c.job_id == _jobs.c.id,
                    _job_locations.c.location_id == _locations.c.id,
                    _locations.c.province_code == self.province,
                )
            )
        return where


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


# Each employer's latest change, from the change feed's index (employer, updatedAt): a lookup
# an employer rather than a read of every job.
_LATEST = (
    select(func.max(_jobs.c.updated_at))
    .where(_jobs.c.employer_id == _employers.c.id)
    .correlate(_employers)
    .scalar_subquery()
)


def open_stamp(connection: Connection) -> Stamp:
    """The stamp of every open job, read without reading the jobs: the count of active ones and
    the change counter from `job_tallies` (a job added, deleted, or changed in status or search
    text raises it, C6), and the latest `updatedAt`, which every other write moves. A write
    stamped before the latest may commit after it, within half CHANGE_FEED_LAG_SECONDS (C10):
    `settled` says whether the stamp can still be overtaken so."""
    statement = select(
        func.coalesce(func.sum(case((_tallies.c.status == "active", _tallies.c.jobs), else_=0)), 0),
        func.coalesce(func.sum(_tallies.c.changes), 0),
        select(func.max(_LATEST)).select_from(_employers).scalar_subquery(),
    )
    count, changes, latest = connection.execute(statement).one()
    return Stamp(int(count), int(changes), latest)


def settled(stamp: Stamp, now: datetime, lag_seconds: float) -> bool:
    """Whether every write stamped up to `stamp.latest` has committed (or never will): a write
    commits within half the lag of its stamp (`models.db.feed`), so once the latest change is
    a lag old, a later write can only raise the stamp."""
    return stamp.latest is None or stamp.latest <= now - timedelta(seconds=lag_seconds)


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


@dataclass(frozen=True)
class Place:
    name: str
    type: str  # City, Province or Territory (C3)
    province_code: str


@dataclass(frozen=True)
class OpenJob:
    """An open job as the feeds show it; its attributes are named as `Job`'s, so the pages'
    wording (`api.html_render`) reads either."""

    id: int
    employer_name: str
    title: str
    description: str
    language: str
    translation_title: str | None
    translation_description: str | None
    publish_date: date
    close_date: date
    updated_at: datetime
    confidential: bool
    position_type_id: int
    salary_amount: Decimal | None
    salary_max: Decimal | None
    salary_period_id: int | None
    salary_commission: bool
    workplace_type: str  # C16: onSite, hybrid or remote
    places: tuple[Place, ...]
    category_ids: tuple[int, ...]


_COLUMNS = (
    _jobs.c.id,
    _employers.c.name,
    _jobs.c.title,
    _jobs.c.description,
    _jobs.c.language,
    _jobs.c.translation_title,
    _jobs.c.translation_description,
    _jobs.c.publish_date,
    _jobs.c.close_date,
    _jobs.c.updated_at,
    _jobs.c.confidential,
    _jobs.c.position_type_id,
    _jobs.c.salary_amount,
    _jobs.c.salary_max,
    _jobs.c.salary_period_id,
    _jobs.c.salary_commission,
    _jobs.c.workplace_type,
)

_FIELDS = [f.name for f in fields(OpenJob)][: len(_COLUMNS)]  # the columns' names, in order


def open_jobs(connection: Connection, filters: Filters = Filters()) -> Iterator[list[OpenJob]]:
    """The open jobs that pass `filters`, by id, BATCH at a time: three statements a batch
    (the jobs, their places, their categories), each bounded by the batch."""
    after, batch = 0, BATCH
    where = filters.conditions()
    while True:
        statement = (
            select(*_COLUMNS)
            .select_from(_jobs.join(_employers, _employers.c.id == _jobs.c.employer_id))
            .where(PUBLIC, _jobs.c.id > after, *where)
            .order_by(_jobs.c.id)
            .limit(batch)
        )
        rows = connection.execute(statement).all()
        if not rows:
            return
        ids = [int(row[0]) for row in rows]
        places, categories = _places(connection, ids), _categories(connection, ids)
        yield [_open_job(row, places, categories) for row in rows]
        after = ids[-1]
        if len(rows) < batch:
            return


def _open_job(
    row: Any, places: dict[int, list[Place]], categories: dict[int, list[int]]
) -> OpenJob:
    job_id = int(row[0])
    places_of, categories_of = tuple(places.get(job_id, ())), tuple(categories.get(job_id, ()))
    return OpenJob(
        **dict(zip(_FIELDS, row, strict=True)), places=places_of, category_ids=categories_of
    )


def _places(connection: Connection, ids: list[int]) -> dict[int, list[Place]]:
    statement = (
        select(
            _job_locations.c.job_id,
            _locations.c.name,
            _locations.c.type,
            _locations.c.province_code,
        )
        .join(_locations, _locations.c.id == _job_locations.c.location_id)
        .where(_job_locations.c.job_id.in_(ids))
        .order_by(_job_locations.c.job_id, _job_locations.c.position)
    )
    found: dict[int, list[Place]] = {}
    for job_id, name, kind, province in connection.execute(statement):
        found.setdefault(int(job_id), []).append(Place(name, kind, province))
    return found


def _categories(connection: Connection, ids: list[int]) -> dict[int, list[int]]:
    statement = (
        select(_job_categories.c.job_id, _job_categories.c.category_id)
        .where(_job_categories.c.job_id.in_(ids))
        .order_by(_job_categories.c.job_id, _job_categories.c.position)
    )
    found: dict[int, list[int]] = {}
    for job_id, category_id in connection.execute(statement):
        found.setdefault(int(job_id), []).append(int(category_id))
    return found
