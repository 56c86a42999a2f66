"""The open jobs as the sitemaps and feeds read them (C15): the public set (active, not taken
down, as the job page shows them), a cheap stamp of it for the validators, and its jobs read
in keyset batches by id, so a feed of any size is read in bounded memory and a job that stays
open is never skipped or read twice while others come and go."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Table,
    Text,
    and_,
    case,
    exists,
    false,
    func,
    literal,
    literal_column,
    select,
)

from models.core.errors import FieldError
from models.db.entities import Employer, Job, JobCategory, JobLocation, JobTally, Location
from models.jobs import workplace
from models.jobs.search import GRAM, fold_for_search, like_pattern, search_grams
from models.reference.lists import CATEGORY_NAMES, POSITION_TYPE_NAMES

_jobs = cast(Table, Job.__table__)
_employers = cast(Table, Employer.__table__)
_job_locations = cast(Table, JobLocation.__table__)
_job_categories = cast(Table, JobCategory.__table__)
_locations = cast(Table, Location.__table__)
_tallies = cast(Table, JobTally.__table__)

BATCH = 500  # jobs a statement reads: what a feed holds in memory at once
PUBLIC = and_(_jobs.c.status == "active", _jobs.c.taken_down == false())
# The open jobs' gram index keys no employer (migration 0026): written out, not a parameter,
# so the statement's expression is the index's.
ANY_EMPLOYER = literal_column("0", Integer)


# A year's worth of each pay period (C17): 52 weeks, 5 working days a week, 8 hours a day.
ANNUAL = {1: 1, 2: 12, 3: 52, 4: 260, 5: 2080}
MAX_DAYS = 365  # `days` reaches back at most a year
MAX_PAY = 10_000_000  # `minPay`: whole dollars a year
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The query names of the filters, in the order a link writes them (`Filters.to_query`).
NAMES = (
    "q",
    "category",
    "province",
    "place",
    "positionType",
    "workplaceType",
    "minPay",
    "days",
)


@dataclass(frozen=True)
class Filters:
    """The public search's filters (C15, C17), what the search page, the Atom feed and a
    saved search narrow the open jobs by: `q` as the API's (C6), a category id, a province
    code, a place (a location id, C3), a position type id, a workplace type (C16), a minimum
    pay a year in whole dollars (`ANNUAL` turns any period into a year), and `days`: posted
    within that many days. Read from and written to a query string (`from_query`,
    `to_query`), so a link or a stored search keeps them as the page does."""

    q: str | None = None
    category: int | None = None
    province: str | None = None
    place: int | None = None
    position_type: int | None = None
    workplace_type: str | None = None
    min_pay: int | None = None
    days: int | None = None

    def to_query(self) -> list[tuple[str, str]]:
        """The filters set, as query parameters in NAMES's order."""
        values = (
            self.q,
            self.category,
            self.province,
            self.place,
            self.position_type,
            self.workplace_type,
            self.min_pay,
            self.days,
        )
        return [(n, str(v)) for n, v in zip(NAMES, values, strict=True) if v is not None]

    @classmethod
    def from_query(cls, values: Mapping[str, str | None]) -> tuple[Filters, list[FieldError]]:
        """The filters of a query string's values (an empty value is absent, C1), and an
        entry for each value no search means; a place's existence is `unknown_places`'s."""
        errors: list[FieldError] = []

        def get(name: str) -> str | None:
            return values.get(name) or None

        q = get("q")
        if q is not None and _CONTROL.search(q):
            message = "q must not contain control characters (such as NUL)."
            errors.append(FieldError("q", "invalid_format", message))
            q = None
        category = _number(get("category"), "category", 1, 2**31 - 1, errors)
        if category is not None and category not in CATEGORY_NAMES:
            errors.append(FieldError("category", "unknown_category", "No category has this id."))
            category = None
        province = _one_of(get("province"), "province", workplace.PROVINCE_CODES, errors)
        place = _number(get("place"), "place", 1, 2**31 - 1, errors)
        position = _number(get("positionType"), "positionType", 1, 2**31 - 1, errors)
        if position is not None and position not in POSITION_TYPE_NAMES:
            message = "No position type has this id."
            errors.append(FieldError("positionType", "unknown_position_type", message))
            position = None
        kind = _one_of(get("workplaceType"), "workplaceType", workplace.TYPES, errors)
        min_pay = _number(get("minPay"), "minPay", 1, MAX_PAY, errors)
        days = _number(get("days"), "days", 1, MAX_DAYS, errors)
        found = cls(q, category, province, place, position, kind, min_pay, days)
        return found, errors

    def conditions(
        self, today: date | None = None, *, grams: bool = False
    ) -> list[ColumnElement[bool]]:
        """The filters as conditions on `jobs`; `days` counts back from `today`. With `grams`
        (PostgreSQL), `q` also asks the open jobs' gram index (migration 0026) for the jobs
        holding its grams; LIKE still decides, as in the employer's list (C6)."""
        where: list[ColumnElement[bool]] = []
        if self.q:
            folded = fold_for_search(self.q)
            where.append(_jobs.c.search_text.contains(like_pattern(folded), escape="/"))
            if grams and len(folded) >= GRAM:
                wanted = search_grams(ANY_EMPLOYER, literal(folded, Text))
                where.append(search_grams(ANY_EMPLOYER, _jobs.c.search_text).contains(wanted))
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
        if self.place is not None:
            where.append(
                exists().where(
                    _job_locations.c.job_id == _jobs.c.id,
                    _job_locations.c.location_id == self.place,
                )
            )
        if self.position_type is not None:
            where.append(_jobs.c.position_type_id == self.position_type)
        if self.workplace_type is not None:
            where.append(_jobs.c.workplace_type == self.workplace_type)
        if self.min_pay is not None:
            top = func.coalesce(_jobs.c.salary_max, _jobs.c.salary_amount)
            factor = case(*((_jobs.c.salary_period_id == i, n) for i, n in ANNUAL.items()), else_=0)
            where.append(top * factor >= self.min_pay)
        if self.days is not None:
            if today is None:
                raise ValueError("days needs today")
            where.append(_jobs.c.publish_date > today - timedelta(days=self.days))
        return where


def _number(
    raw: str | None, name: str, low: int, high: int, errors: list[FieldError]
) -> int | None:
    if raw is None:
        return None
    if not _DIGITS.fullmatch(raw):
        errors.append(FieldError(name, "invalid_type", f"{name} must be a whole number."))
        return None
    if not low <= int(raw) <= high:
        errors.append(FieldError(name, "out_of_range", f"{name} must be {low} to {high}."))
        return None
    return int(raw)


def _one_of(
    raw: str | None, name: str, allowed: tuple[str, ...], errors: list[FieldError]
) -> str | None:
    if raw is not None and raw not in allowed:
        message = f"{name} must be one of {', '.join(allowed)}."
        errors.append(FieldError(name, "out_of_range", message))
        return None
    return raw


_DIGITS = re.compile(r"[0-9]{1,10}")


def place_description(connection: Connection, place_id: int) -> str | None:
    """A location as applicants read it ("Toronto, ON"), None when no location has the id."""
    statement = select(_locations.c.description).where(_locations.c.id == place_id)
    found = connection.execute(statement).scalar_one_or_none()
    return str(found) if found is not None else None


def unknown_places(connection: Connection, filters: Filters) -> list[FieldError]:
    """An entry when `place` names no listed location (C3)."""
    if filters.place is None:
        return []
    found = connection.execute(
        select(_locations.c.id).where(_locations.c.id == filters.place)
    ).first()
    if found is not None:
        return []
    return [FieldError("place", "unknown_location", "No location has this id.")]


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
    id: int = 0
    description: str = ""  # as applicants read it: "Toronto, ON" (C3)


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


def open_jobs(
    connection: Connection, filters: Filters = Filters(), today: date | None = None
) -> Iterator[list[OpenJob]]:
    """The open jobs that pass `filters` (`days` counting back from `today`), by id, BATCH
    at a time: three statements a batch (the jobs, their places, their categories), each
    bounded by the batch."""
    after, batch = 0, BATCH
    where = filters.conditions(today, grams=connection.dialect.name == "postgresql")
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


def read_jobs(
    connection: Connection,
    where: list[ColumnElement[bool]],
    order: Sequence[ColumnElement[Any]],
    limit: int,
    offset: int = 0,
    *,
    with_categories: bool = True,
) -> list[OpenJob]:
    """One page of the open jobs that meet `where`, in `order` (the search page, C17): the
    jobs, then their places and (unless not `with_categories`: none then) their categories,
    statements bounded by `limit`."""
    # The page's ids first, then their rows with the employer: a join under the search
    # would be planned for the one row a rare word's estimate says, and test each match
    # against every employer.
    page = (
        select(_jobs.c.id)
        .where(PUBLIC, *where)
        .order_by(*order)
        .limit(limit)
        .offset(offset)
        .subquery("page")
    )
    statement = (
        select(*_COLUMNS)
        .select_from(
            page.join(_jobs, _jobs.c.id == page.c.id).join(
                _employers, _employers.c.id == _jobs.c.employer_id
            )
        )
        .order_by(*order)
    )
    rows = connection.execute(statement).all()
    if not rows:
        return []
    ids = [int(row[0]) for row in rows]
    places = _places(connection, ids)
    categories = _categories(connection, ids) if with_categories else {}
    return [_open_job(row, places, categories) for row in rows]


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
            _locations.c.id,
            _locations.c.description,
        )
        .join(_locations, _locations.c.id == _job_locations.c.location_id)
        .where(_job_locations.c.job_id.in_(ids))
        .order_by(_job_locations.c.job_id, _job_locations.c.position)
    )
    found: dict[int, list[Place]] = {}
    for job_id, name, kind, province, place_id, description in connection.execute(statement):
        place = Place(name, kind, province, int(place_id), description)
        found.setdefault(int(job_id), []).append(place)
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
