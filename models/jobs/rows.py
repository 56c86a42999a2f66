"""A job as plain values, read and written with precompiled Core statements (C4).

Writing a job and reading one are what employers' systems repeat most, so neither builds ORM
objects or flushes a unit of work: a job is a `StoredJob` of plain values, its read is one
statement (the job, its locations and its categories), and on PostgreSQL so is each write:
the job's row, its locations, its categories and the listing of its places together
(data-modifying WITH queries). SQLite, which has no such queries, runs the same steps one
statement each, in the transaction its writers hold the database with.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Executable,
    Integer,
    String,
    Table,
    and_,
    any_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal_column,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from models.db import json_rows
from models.db.entities import Job, JobCategory, JobLocation, Location
from models.db.fast_reads import Precompiled
from models.reference.places import PLACE_COLUMNS, Place

_jobs = cast(Table, Job.__table__)
_job_locations = cast(Table, JobLocation.__table__)
_job_categories = cast(Table, JobCategory.__table__)
_locations = cast(Table, Location.__table__)

# The columns a write sets, in the order of StoredJob's fields after id and employer_id.
VALUES = (
    "reference_id",
    "title",
    "publish_date",
    "close_date",
    "confidential",
    "auto_refresh",
    "status",
    "position_type_id",
    "salary_amount",
    "salary_max",
    "salary_period_id",
    "salary_commission",
    "description",
    "routing_type",
    "application_email",
    "application_url",
    "language",
    "translation_title",
    "translation_description",
    "ai_screening",
    "existing_vacancy",
    "workplace_type",
    "applicant_locations",
    "taken_down",
    "questions",
)
# Set by every write beside them: computed, never read back into a StoredJob (a sync run's
# batch reads the last two apart, `last_written`).
DERIVED = ("search_text", "updated_at", "sync_digest", "sync_warnings")


@dataclass(frozen=True)
class StoredJob:
    """A job's row, and its locations and category ids in their order. A job read locked
    for a write (`lock`) has None for them: a write that replaces both never reads them."""

    id: int
    employer_id: int
    reference_id: str | None
    title: str
    publish_date: date
    close_date: date
    confidential: bool
    auto_refresh: bool
    status: str
    position_type_id: int
    salary_amount: Decimal | None
    salary_max: Decimal | None
    salary_period_id: int | None
    salary_commission: bool
    description: str
    routing_type: int
    application_email: str | None
    application_url: str | None
    language: str
    translation_title: str | None
    translation_description: str | None
    ai_screening: bool | None
    existing_vacancy: bool | None
    workplace_type: str
    applicant_locations: str  # as stored: `models.jobs.workplace`
    taken_down: bool
    questions: str | None  # as stored: `models.jobs.questions`
    version: int
    updated_at: datetime | None  # the last stored change (C10); None before the first
    locations: tuple[Place, ...] | None = None
    category_ids: tuple[int, ...] | None = None

    def values(self) -> dict[str, Any]:
        """The columns a write sets, by name."""
        return {name: getattr(self, name) for name in VALUES}


_ROW = (
    _jobs.c.id,
    _jobs.c.employer_id,
    *(_jobs.c[name] for name in VALUES),
    _jobs.c.version,
    _jobs.c.updated_at,
)
_ID, _EMPLOYER = bindparam("job_id", type_=Integer), bindparam("employer_id", type_=Integer)
_LOCATION, _CATEGORY = 0, 1  # the kinds of a job's items


def _items() -> Any:
    """A job's locations and categories as (job_id, kind, position, item id) rows."""
    return union_all(
        select(
            _job_locations.c.job_id,
            literal_column(str(_LOCATION), Integer).label("kind"),
            _job_locations.c.position,
            _job_locations.c.location_id.label("item"),
        ),
        select(
            _job_categories.c.job_id,
            literal_column(str(_CATEGORY), Integer),
            _job_categories.c.position,
            _job_categories.c.category_id,
        ),
    ).subquery("items")


@dataclass(frozen=True)
class WholeJob:
    """What reads a job whole, to be joined to another statement (`models.employers`): its
    tables (jobs, then its items and their places), the columns `gather` reads, the order."""

    tables: Any
    columns: tuple[Any, ...]
    order: tuple[Any, ...]


def whole_job() -> WholeJob:
    """The job with its items, a row per item (one row of NULL items when it has none)."""
    items = _items()
    place = _locations.c
    tables = _jobs.outerjoin(items, items.c.job_id == _jobs.c.id).outerjoin(
        _locations, and_(items.c.kind == _LOCATION, place.id == items.c.item)
    )
    columns = (*_ROW, items.c.kind, items.c.item, *PLACE_COLUMNS[1:])
    return WholeJob(tables, columns, (items.c.kind, items.c.position))


def _whole() -> Precompiled:
    whole = whole_job()
    return Precompiled(
        select(*whole.columns)
        .select_from(whole.tables)
        .where(_jobs.c.id == _ID, _jobs.c.employer_id == _EMPLOYER)
        .order_by(*whole.order)
    )


def _children() -> Precompiled:
    """A job's items alone, with the place of each location."""
    items = _items()
    place = _locations.c
    return Precompiled(
        select(items.c.kind, items.c.item, *PLACE_COLUMNS[1:])
        .select_from(
            items.outerjoin(_locations, and_(items.c.kind == _LOCATION, place.id == items.c.item))
        )
        .where(items.c.job_id == _ID)
        .order_by(items.c.kind, items.c.position)
    )


_WHOLE = _whole()
_CHILDREN = _children()
_LOCK_BY_ID = Precompiled(
    select(*_ROW).where(_jobs.c.id == _ID, _jobs.c.employer_id == _EMPLOYER).with_for_update()
)
_LOCK_BY_REFERENCE = Precompiled(
    select(*_ROW)
    .where(
        _jobs.c.employer_id == _EMPLOYER,
        _jobs.c.reference_id == bindparam("reference_id", type_=String),
    )
    .with_for_update()
)


_HOLDER = Precompiled(
    select(_jobs.c.id).where(
        _jobs.c.employer_id == _EMPLOYER,
        _jobs.c.reference_id == bindparam("reference_id", type_=String),
    )
)


def holder(connection: Connection, employer_id: int, reference_id: str) -> int | None:
    """The id of the employer's job with this referenceId, if any (unlocked)."""
    row = _HOLDER.first(connection, {"employer_id": employer_id, "reference_id": reference_id})
    return None if row is None else int(row[0])


def read(connection: Connection, employer_id: int, job_id: int) -> StoredJob | None:
    """The employer's job with its locations and categories, in one statement."""
    return gather(_WHOLE.all(connection, {"job_id": job_id, "employer_id": employer_id}))


def gather(rows: list[tuple[Any, ...]]) -> StoredJob | None:
    """The job of rows of `whole_job`'s columns; None for no row, or a row of NULLs."""
    if not rows or rows[0][0] is None:
        return None
    places, categories = _gather([row[len(_ROW) :] for row in rows])
    return _with_arrays(_job(rows[0]), places, categories)


def lock(
    connection: Connection,
    employer_id: int,
    *,
    job_id: int | None = None,
    reference_id: str | None = None,
) -> StoredJob | None:
    """The employer's job by id or referenceId, locked until commit (PostgreSQL; SQLite's
    writers hold the whole database already). Its row is read as the lock finds it, after
    any write of it in flight has committed; its locations and categories are not read
    (`complete` reads them, then, as committed too)."""
    if job_id is not None:
        row = _LOCK_BY_ID.first(connection, {"job_id": job_id, "employer_id": employer_id})
    else:
        params = {"employer_id": employer_id, "reference_id": reference_id}
        row = _LOCK_BY_REFERENCE.first(connection, params)
    return None if row is None else _job(row)


def complete(connection: Connection, job: StoredJob) -> StoredJob:
    """`job` with its locations and categories, read if it has none."""
    if job.locations is not None and job.category_ids is not None:
        return job
    places, categories = _gather(_CHILDREN.all(connection, {"job_id": job.id}))
    return _with_arrays(
        job,
        places if job.locations is None else job.locations,
        categories if job.category_ids is None else job.category_ids,
    )


def _job(row: tuple[Any, ...]) -> StoredJob:
    return StoredJob(*row[: len(_ROW)])


def _gather(items: list[tuple[Any, ...]]) -> tuple[tuple[Place, ...], tuple[int, ...]]:
    """Rows of (kind, item id, place columns) in order: the places and the category ids."""
    places = tuple(Place(item, *rest) for kind, item, *rest in items if kind == _LOCATION)
    categories = tuple(item for kind, item, *_rest in items if kind == _CATEGORY)
    return places, categories


def _with_arrays(
    job: StoredJob, places: tuple[Place, ...], categories: tuple[int, ...]
) -> StoredJob:
    return StoredJob(**{**job.__dict__, "locations": places, "category_ids": categories})


def _params(job: StoredJob, derived: dict[str, Any], **key: Any) -> dict[str, Any]:
    """The bound values of a job's write: its columns, what is derived from them, its key,
    and the ids of its places and categories."""
    assert job.locations is not None and job.category_ids is not None
    return {
        **job.values(),
        **derived,
        **key,
        "location_ids": [p.id for p in job.locations],
        "category_ids": list(job.category_ids),
    }


def insert_job(
    connection: Connection, job: StoredJob, derived: dict[str, Any]
) -> tuple[int, list[int]] | None:
    """Insert `job` (its id and version are the database's) with its locations and
    categories, and list its places (C3): its id, and the ids of the places it listed (C10
    `location_added`). None, and nothing written, when the employer already has a job with
    its referenceId (a concurrent request's, committed meanwhile)."""
    params = _params(job, derived, employer_id=job.employer_id)
    if connection.dialect.name == "postgresql":
        row = _pg_insert().first(connection, params)
        return None if row is None else (int(row[0]), list(row[1] or ()))
    job_id = connection.execute(_sqlite_insert(), params).scalar()
    if job_id is None:
        return None
    return job_id, _sqlite_items(connection, job_id, params, locations=True, categories=True)


def update_job(
    connection: Connection,
    job: StoredJob,
    derived: dict[str, Any],
    *,
    locations: bool,
    categories: bool,
) -> list[int]:
    """Write `job`'s columns and raise its version; with `locations` or `categories`, replace
    those too (a position whose item is unchanged is left as it is). The ids of the places
    it listed (C10 `location_added`). An IntegrityError is another job holding its
    referenceId."""
    params = _params(job, derived, job_id=job.id)
    if connection.dialect.name == "postgresql":
        row = _pg_update(locations, categories).first(connection, params)
        return list(row[1] or ()) if row is not None and locations else []
    connection.execute(_job_update(), params)
    return _sqlite_items(connection, job.id, params, locations=locations, categories=categories)


_UNLISTED = select(_locations.c.id).where(
    _locations.c.id.in_(bindparam("ids", expanding=True)), _locations.c.listed.is_(False)
)


def unlisted(connection: Connection, ids: list[int]) -> list[int]:
    """Which of these places are not in the locations list yet: those a write of them would
    list (a dry run's `location_added`, C10)."""
    return [int(row[0]) for row in connection.execute(_UNLISTED, {"ids": ids})]


def delete_job(
    connection: Connection,
    employer_id: int,
    *,
    job_id: int | None = None,
    reference_id: str | None = None,
) -> tuple[int, str, str | None] | None:
    """Delete the employer's job by id or referenceId (its items, and the job id of its
    applications, go with it by the foreign keys); its id, the status it had and its
    referenceId, None when there was none. A job locked by a
    write in flight is waited for and then matched as that write left it: the DELETE of a
    referenceId that a concurrent PUT gives up deletes nothing (C4)."""
    found = _jobs.c.id == job_id if job_id is not None else _jobs.c.reference_id == reference_id
    statement = delete(_jobs).where(_jobs.c.employer_id == employer_id, found)
    gone = statement.returning(_jobs.c.id, _jobs.c.status, _jobs.c.reference_id)
    row = connection.execute(gone).first()
    return None if row is None else (int(row[0]), str(row[1]), row[2])


def _column_values() -> dict[str, Any]:
    return {name: bindparam(name, type_=_jobs.c[name].type) for name in (*VALUES, *DERIVED)}


def _ids(name: str) -> Any:
    return bindparam(name, type_=postgresql.ARRAY(Integer))


def _numbered(name: str) -> Any:
    """The ids of an array parameter with their positions from 0, as a table (PostgreSQL)."""
    return func.unnest(_ids(name)).table_valued("item", with_ordinality="n").render_derived()


@functools.cache
def _pg_insert() -> Precompiled:
    created = (
        postgresql.insert(_jobs)
        .values(
            employer_id=_EMPLOYER,
            version=literal_column("1"),
            **_column_values(),
        )
        .on_conflict_do_nothing(index_elements=[_jobs.c.employer_id, _jobs.c.reference_id])
        .returning(_jobs.c.id)
        .cte("created")
    )
    parts = [
        _pg_items_insert(table, column, ids, created.c.id, select_from=created)
        for table, column, ids in _ITEM_TABLES
    ]
    listed = _pg_listing(exists(select(created.c.id)))
    return Precompiled(select(created.c.id, _listed_ids(listed)).add_cte(*parts, listed))


@functools.cache
def _pg_update(locations: bool, categories: bool) -> Precompiled:
    changed = _job_update().returning(_jobs.c.id).cte("changed")
    parts: list[Any] = []
    for (table, column, ids), replaced in zip(_ITEM_TABLES, (locations, categories), strict=True):
        if not replaced:
            continue
        job_id = table.c.job_id
        parts.append(
            delete(table)
            .where(job_id == _ID, table.c.position >= func.cardinality(_ids(ids)))
            .cte(f"dropped_{ids}")
        )
        parts.append(_pg_items_insert(table, column, ids, _ID, upsert=True))
    if not locations:
        return Precompiled(select(changed.c.id).add_cte(*parts))
    listed = _pg_listing(true())
    return Precompiled(select(changed.c.id, _listed_ids(listed)).add_cte(*parts, listed))


def _pg_items_insert(
    table: Any, column: str, ids: str, job_id: Any, *, select_from: Any = None, upsert: bool = False
) -> Any:
    """Insert the items of array parameter `ids` at their positions; with `upsert`, over the
    ones there, rewriting a position only when its item changed."""
    numbered = _numbered(ids)
    rows = select(job_id, numbered.c.n - literal_column("1"), numbered.c.item)
    rows = rows.select_from(select_from).join(numbered, true()) if select_from is not None else rows
    statement = postgresql.insert(table).from_select(["job_id", "position", column], rows)
    if upsert:
        statement = statement.on_conflict_do_update(
            index_elements=[table.c.job_id, table.c.position],
            set_={column: statement.excluded[column]},
            where=table.c[column] != statement.excluded[column],
        )
    return statement.cte(f"written_{ids}")


def _pg_listing(condition: Any) -> Any:
    """A gazetteer place written in a job joins the locations list (C3)."""
    return (
        update(_locations)
        .where(_locations.c.id == any_(_ids("location_ids")), _locations.c.listed.is_(False))
        .where(condition)
        .values(listed=True)
        .returning(_locations.c.id)
        .cte("listed")
    )


def _listed_ids(listed: Any) -> Any:
    """The ids the listing CTE listed, as one array (NULL when none): a concurrent write
    listing the same place first is waited for, and then this one lists nothing."""
    return select(func.array_agg(listed.c.id)).scalar_subquery().label("listed")


_ITEM_TABLES = (
    (_job_locations, "location_id", "location_ids"),
    (_job_categories, "category_id", "category_ids"),
)


@functools.cache
def _job_update() -> Any:
    return (
        update(_jobs)
        .where(_jobs.c.id == _ID)
        .values(**_column_values(), version=_jobs.c.version + 1)
    )


@functools.cache
def _sqlite_insert() -> Executable:
    return (
        sqlite.insert(_jobs)
        .values(employer_id=_EMPLOYER, version=literal_column("1"), **_column_values())
        .on_conflict_do_nothing(index_elements=[_jobs.c.employer_id, _jobs.c.reference_id])
        .returning(_jobs.c.id)
    )


def _sqlite_items(
    connection: Connection,
    job_id: int,
    params: dict[str, Any],
    *,
    locations: bool,
    categories: bool,
) -> list[int]:
    """Replace the items (SQLite): delete them all, insert the new ones, list the places;
    the ids of the places listed."""
    for (table, column, ids), replaced in zip(_ITEM_TABLES, (locations, categories), strict=True):
        if not replaced:
            continue
        connection.execute(delete(table).where(table.c.job_id == job_id))
        rows = [{"job_id": job_id, "position": i, column: v} for i, v in enumerate(params[ids])]
        connection.execute(insert(table), rows)
    if not locations:
        return []
    listed = connection.execute(
        update(_locations)
        .where(_locations.c.id.in_(params["location_ids"]), _locations.c.listed.is_(False))
        .values(listed=True)
        .returning(_locations.c.id)
    )
    return [int(row[0]) for row in listed]


# --- many jobs at once: a sync run's batch (models.syncs.batches) -------------------------------


def lock_many(
    connection: Connection, employer_id: int, reference_ids: list[str]
) -> dict[str, StoredJob]:
    """The employer's jobs holding these referenceIds, whole, locked until commit (in id
    order, as any two batches lock them): two statements whatever their number."""
    if not reference_ids:
        return {}
    rows = connection.execute(
        select(*_ROW)
        .where(
            _jobs.c.employer_id == employer_id,
            _jobs.c.reference_id.in_(bindparam("refs", expanding=True)),
        )
        .order_by(_jobs.c.id)
        .with_for_update(),
        {"refs": reference_ids},
    ).all()
    jobs = {int(row[0]): _job(tuple(row)) for row in rows}
    if not jobs:
        return {}
    items = _items()
    place = _locations.c
    children: dict[int, list[tuple[Any, ...]]] = {job_id: [] for job_id in jobs}
    for job_id, *rest in connection.execute(
        select(items.c.job_id, items.c.kind, items.c.item, *PLACE_COLUMNS[1:])
        .select_from(
            items.outerjoin(_locations, and_(items.c.kind == _LOCATION, place.id == items.c.item))
        )
        .where(items.c.job_id.in_(bindparam("ids", expanding=True)))
        .order_by(items.c.job_id, items.c.kind, items.c.position),
        {"ids": list(jobs)},
    ):
        children[job_id].append(tuple(rest))
    whole = {}
    for job_id, job in jobs.items():
        places, categories = _gather(children[job_id])
        whole[cast(str, job.reference_id)] = _with_arrays(job, places, categories)
    return whole


@dataclass(frozen=True)
class Written:
    """What the last write of a job left for a sync item's resend (models.syncs.digests)."""

    job_id: int
    version: int
    digest: str | None
    warnings: str | None


_LAST_WRITTEN = select(
    _jobs.c.reference_id, _jobs.c.id, _jobs.c.version, _jobs.c.sync_digest, _jobs.c.sync_warnings
).where(
    _jobs.c.employer_id == _EMPLOYER,
    _jobs.c.reference_id.in_(bindparam("refs", expanding=True)),
)


def last_written(
    connection: Connection, employer_id: int, reference_ids: list[str]
) -> dict[str, Written]:
    """By referenceId, what the employer's jobs holding these last kept for a resend: one
    statement, no lock. An item found unchanged needs none (it writes nothing, and is
    answered as of this read); any other is locked and read again (`lock_many`)."""
    params = {"employer_id": employer_id, "refs": reference_ids}
    return {
        str(ref): Written(int(job_id), int(version), digest, kept)
        for ref, job_id, version, digest, kept in connection.execute(_LAST_WRITTEN, params)
    }


def insert_many(
    connection: Connection, written: list[tuple[StoredJob, dict[str, Any]]], at: datetime
) -> dict[str, tuple[int, list[int]]]:
    """Insert new jobs (each with its row: its columns and what is derived from them, but
    `updated_at`, which is `at` for all) with their locations and categories, and list their
    places (C3), in a few statements whatever their number: by referenceId, each job's id
    and the places it listed, each place credited to the first job in order that names it.
    A job whose referenceId the employer already holds (a concurrent write's) is not
    written and not in the answer."""
    if not written:
        return {}
    rows = [row | {"updated_at": at} for _job, row in written]
    if connection.dialect.name == "postgresql":  # one statement, whatever their number
        inserted = connection.execute(
            _pg_insert_many(), {json_rows.PARAMETER: json_rows.text(rows)}
        )
    else:
        inserted = connection.execute(_sqlite_insert_many(), [row | {"version": 1} for row in rows])
    ids = {str(ref): int(job_id) for job_id, ref in inserted}
    kept = [job for job, _derived in written if job.reference_id in ids]
    for table, column, kind in _ITEM_TABLES:
        items = [
            {"job_id": ids[cast(str, job.reference_id)], "position": i, column: item}
            for job in kept
            for i, item in enumerate(_item_ids(job, kind))
        ]
        if not items:
            continue
        if connection.dialect.name == "postgresql":
            names = ("job_id", "position", column)
            given = {json_rows.PARAMETER: json_rows.text(items)}
            connection.execute(_pg_rows(table.name, names), given)
        else:
            connection.execute(insert(table), items)
    named = sorted({place.id for job in kept for place in job.locations or ()})
    listed: set[int] = set()
    if named:
        listed = {
            int(row[0])
            for row in connection.execute(
                update(_locations)
                .where(
                    _locations.c.id.in_(bindparam("named", expanding=True)),
                    _locations.c.listed.is_(False),
                )
                .values(listed=True)
                .returning(_locations.c.id),
                {"named": named},
            )
        }
    found: dict[str, tuple[int, list[int]]] = {}
    for job in kept:
        mine = [p.id for p in job.locations or () if p.id in listed]
        listed.difference_update(mine)
        found[cast(str, job.reference_id)] = (ids[cast(str, job.reference_id)], mine)
    return found


def _item_ids(job: StoredJob, kind: str) -> list[int]:
    if kind == "location_ids":
        return [p.id for p in job.locations or ()]
    return list(job.category_ids or ())


_INSERTED = ("employer_id", *VALUES, *DERIVED)  # version: the column's default, 1


def _given(table: Table, names: tuple[str, ...]) -> Any:
    """Rows of `table`'s columns `names` from one JSON parameter (models.db.json_rows)."""
    rows = json_rows.rows_of(table)
    return select(*(rows.c[name] for name in names))


@functools.cache
def _pg_insert_many() -> Executable:
    return (
        postgresql.insert(_jobs)
        .from_select(list(_INSERTED), _given(_jobs, _INSERTED))
        .on_conflict_do_nothing(index_elements=[_jobs.c.employer_id, _jobs.c.reference_id])
        .returning(_jobs.c.id, _jobs.c.reference_id)
    )


@functools.cache
def _pg_rows(table_name: str, names: tuple[str, ...]) -> Executable:
    table = {t.name: t for t, _column, _ids in _ITEM_TABLES}[table_name]
    return insert(table).from_select(list(names), _given(table, names))


@functools.cache
def _sqlite_insert_many() -> Executable:
    return (
        sqlite.insert(_jobs)
        .on_conflict_do_nothing(index_elements=[_jobs.c.employer_id, _jobs.c.reference_id])
        .returning(_jobs.c.id, _jobs.c.reference_id)
    )
