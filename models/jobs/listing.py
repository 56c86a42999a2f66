"""The employer's job list (C6): its statements, the planner that picks the cheaper reading
of a search, and the headers its rows become."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    func,
    literal_column,
    null,
    select,
    true,
)

from models.db.entities import Job, JobLocation, Location
from models.db.fast_reads import Precompiled, planned_for_values
from models.jobs import tallies
from models.jobs.search import GRAM, fold_for_search, like_pattern, search_grams
from models.reference.places import Place


@dataclass(frozen=True)
class Header:
    """A job as the list shows it (C6): plain values, read without the ORM."""

    id: int
    reference_id: str | None
    title: str
    publish_date: date
    confidential: bool
    status: str
    workplace_type: str
    applicant_locations: str  # as stored (`models.jobs.workplace`)
    questions: str | None  # as stored (`models.jobs.questions`)
    updated_at: datetime
    locations: list[Place]


@dataclass(frozen=True)
class Page:
    jobs: list[Header]
    total: int


def listing(
    connection: Connection,
    employer_id: int,
    *,
    q: str | None,
    status: str | None,
    page: int,
    page_size: int,
    totals: tallies.SearchTotals | None = None,
    updated_since: datetime | None = None,
    workplace_type: str | None = None,
) -> Page:
    """The employer's jobs, newest publishDate first, then id (stable across pages, C6).

    `q` is a case-insensitive substring of title or referenceId, its `%` and `_` literal.
    Without it, the page comes with its total, read from the employer's tallies (migration
    0007), in one statement. A search's total is counted; `totals`, when given, keeps it
    for the next search of the same words until the employer's jobs change.
    `updated_since` keeps the jobs changed at or after it (C10); their total is counted
    every time, since neither the tallies nor a kept total know when jobs changed;
    `workplace_type` keeps the jobs of that type (C16), counted alike."""
    folded = fold_for_search(q) if q else ""
    params = {
        "employer_id": employer_id,
        "q": folded,
        "pattern": like_pattern(folded),
        "status": status,
        "limit": page_size,
        "offset": (page - 1) * page_size,
        "since": updated_since,
        "workplace": workplace_type,
    }
    if updated_since is not None or workplace_type is not None:
        return _since(connection, params, folded, status)
    if not folded:
        statement = _list_statement(_Kind.PLAIN, False, bool(status), _first(page, page_size))
        rows = statement.all(connection, params)
        return Page(headers_of(rows), int(rows[0][_JOBS]))
    grams = len(folded) >= GRAM and connection.dialect.name == "postgresql"
    kept = totals if totals is not None else tallies.SearchTotals(0)
    search = _Search(connection, params, grams, _first(page, page_size), kept)
    return search.page(employer_id, status, folded)


def _since(connection: Connection, params: dict[str, Any], q: str, status: str | None) -> Page:
    """A page of the jobs changed since an instant (C10), or of one workplace type (C16),
    with its total counted."""
    grams = len(q) >= GRAM and connection.dialect.name == "postgresql"
    kinds = {
        "grams": grams,
        "status": bool(status),
        "since": params["since"] is not None,
        "search": bool(q),
        "workplace": params["workplace"] is not None,
    }
    with planned_for_values(connection):
        rows = _list_statement(_Kind.MATCHES, **kinds).all(connection, params)
        found = headers_of(rows)
        if found:
            return Page(found, int(rows[0][_MATCHES]))
        (row,) = _list_statement(_Kind.COUNT, **kinds).all(connection, params)
        return Page(found, int(row[_MATCHES]))


class _Kind(enum.Enum):
    """The statements of a list: each answers the employer's tally (its jobs of the status
    and its changes) with the page's rows, a row with no job when the page is empty."""

    PLAIN = enum.auto()  # no q: the employer's jobs in order
    WALK = enum.auto()  # q: the jobs in order, each tested, up to `window` of them
    MATCHES = enum.auto()  # q: every match (by the gram index on PostgreSQL), sorted, counted
    COUNT = enum.auto()  # q: the matches counted, with the tally, and no page


@dataclass
class _Search:
    """A search's page and exact total, by the cheaper of two readings, which the total
    counted before tells apart. Walking the employer's jobs newest first, testing each,
    finds a page of a common word after a few hundred jobs (it reads page × jobs / matches);
    a rare word would have it read them all, where its matches alone are few to read."""

    connection: Connection
    params: dict[str, Any]
    grams: bool
    first: int | None  # the page size, on the first page (`_first`)
    totals: tallies.SearchTotals

    def page(self, employer_id: int, status: str | None, q: str) -> Page:
        kept = self.totals.get(employer_id, status, q)
        reach = kept.reach if kept is not None else 1
        offset, limit = self.params["offset"], self.params["limit"]
        if kept is not None and (window := _window(kept, offset + limit)):
            rows = self._run(_Kind.WALK, status, window=window)
            found = headers_of(rows)
            changes = int(rows[0][_CHANGES])
            total = kept.total if kept.changes == changes else None
            if len(found) == (limit if total is None else min(limit, max(total - offset, 0))):
                if total is None:  # the jobs changed since: count again
                    total = self._count(employer_id, status, q, reach)
                return Page(found, total)
            # Fewer matches than the page holds: they bunch up further back (or the jobs
            # changed), so the next walk of this search goes twice as far.
            reach *= 2
        rows = self._run(_Kind.MATCHES, status)
        found = headers_of(rows)
        changes = int(rows[0][_CHANGES])
        if found:
            total = int(rows[0][_MATCHES])
            self.totals.put(employer_id, status, q, _counted(rows[0], total, reach))
        elif kept is not None and kept.changes == changes:
            total = kept.total  # past the last page, and nothing changed
        else:
            total = self._count(employer_id, status, q, reach)
        return Page(found, total)

    def _count(self, employer_id: int, status: str | None, q: str, reach: int) -> int:
        (row,) = self._run(_Kind.COUNT, status)
        total = int(row[_MATCHES])
        self.totals.put(employer_id, status, q, _counted(row, total, reach))
        return total

    def _run(self, kind: _Kind, status: str | None, **more: Any) -> list[tuple[Any, ...]]:
        """Run a statement of the search. Those reading every match are planned for their
        values each time: how to find them depends on the employer and the words. A walk,
        like a plain page, reads the employer's index in order whoever the employer is, so
        psycopg may prepare it, and PostgreSQL keep its plan."""
        if kind is _Kind.WALK:
            statement = _list_statement(kind, self.grams, bool(status), self.first)
            return statement.all(self.connection, self.params | more)
        statement = _list_statement(kind, self.grams, bool(status))
        with planned_for_values(self.connection):
            return statement.all(self.connection, self.params | more)


def _counted(row: tuple[Any, ...], total: int, reach: int) -> tallies.Counted:
    return tallies.Counted(int(row[_CHANGES]), total, int(row[_JOBS]), reach)


WALK_MARGIN = 2  # matches may bunch up: read up to twice the expected jobs, and a few more


# A match read from the gram index, with its row, then sorted costs about as much as ten jobs
# tested in the employer's index (measured: 1.4 to 4 µs against 0.1 to 0.25 µs).
WALK_CHEAPER = 8


def _window(kept: tallies.Counted, end: int) -> int | None:
    """How many of the employer's jobs to walk for the page ending at match `end`, when
    walking is cheaper than reading every match (as last counted); else None. Should the
    walk come up short, reading the matches after it costs at most about twice reading
    them alone."""
    if kept.total <= 0:
        return None
    expected = -(-end * kept.jobs * kept.reach // kept.total)
    if expected >= WALK_CHEAPER * kept.total:
        return None
    return WALK_MARGIN * expected + 100


def _first(page: int, page_size: int) -> int | None:
    """The page size, for the first page: its statements hold it as a constant."""
    return page_size if page == 1 else None


@functools.lru_cache(maxsize=256)
def _list_statement(
    kind: _Kind,
    grams: bool,
    status: bool,
    first: int | None = None,
    *,
    since: bool = False,
    search: bool = True,
    workplace: bool = False,
) -> Precompiled:
    """One kind of list statement, built and compiled once: a list is read far more often
    than written, and building statements for each cost more than the database's answer.

    `first`: a statement of the first page of that many jobs, holding its LIMIT in the SQL.
    PostgreSQL plans a prepared statement anew for each run while the plan it would keep
    seems dearer, and with its LIMIT a parameter it assumes a tenth of the employer's jobs
    are read: planning then cost the first page, the page most read, three times its run.

    The page's jobs are chosen first, by id from the employer's index (deep pages stay
    cheap), then joined to their header columns and locations; the tally is one row that
    the page joins, so an empty page still answers it.

    `since`: only jobs changed at or after the parameter `since` (C10); `search`: whether
    `q` filters (a list filtered by `since` alone counts its matches too); `workplace`: only
    jobs of the workplace type `workplace` (C16)."""
    employer = bindparam("employer_id", type_=Integer)
    status_value = bindparam("status", type_=String) if status else None
    tally = tallies.of_employer(employer, status_value)
    where = [Job.employer_id == employer]
    if status_value is not None:
        where.append(Job.status == status_value)
    if since:
        where.append(Job.updated_at >= bindparam("since", type_=Job.updated_at.type))
    if workplace:
        where.append(Job.workplace_type == bindparam("workplace", type_=String))
    matches: Any = Job.search_text.contains(bindparam("pattern", type_=Text), escape="/")
    if not search:
        matches = true()
    elif grams:
        wanted = search_grams(employer, bindparam("q", type_=Text))
        matches = and_(matches, search_grams(Job.employer_id, Job.search_text).contains(wanted))
    if kind is _Kind.COUNT:
        counted = select(func.count()).where(*where, matches).scalar_subquery()
        return Precompiled(select(tally.c.jobs, tally.c.changes, counted.label("matches")))
    order = (Job.publish_date.desc(), Job.id.desc())
    if kind is _Kind.WALK:
        walked = select(Job.id, Job.publish_date, Job.search_text).where(*where).order_by(*order)
        # OFFSET 0 written out: SQLite's compiler adds one to a LIMIT, as a parameter.
        walked = walked.limit(bindparam("window", type_=Integer)).offset(tallies.ZERO)
        window = walked.subquery("walked")
        ids = select(window.c.id, null().label("matches")).where(
            window.c.search_text.contains(bindparam("pattern", type_=Text), escape="/")
        )
        ids = ids.order_by(window.c.publish_date.desc(), window.c.id.desc())
    elif kind is _Kind.MATCHES:
        ids = select(Job.id, func.count().over().label("matches")).where(*where, matches)
        ids = ids.order_by(*order)
    else:
        ids = select(Job.id, null().label("matches")).where(*where).order_by(*order)
    if first is None:
        ids = ids.limit(bindparam("limit", type_=Integer))
        ids = ids.offset(bindparam("offset", type_=BigInteger))  # pages run to 2**31 - 1
    else:
        ids = ids.limit(literal_column(str(int(first)))).offset(tallies.ZERO)
    chosen = ids.subquery("chosen")
    page = (
        select(chosen.c.matches, Job.id, *HEADER, JobLocation.position, *PLACE)
        .select_from(chosen)
        .join(Job, Job.id == chosen.c.id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .subquery("page")
    )
    columns = [page.c.id, *(page.c[c.key] for c in HEADER), *(page.c[c.key] for c in PLACE)]
    statement = (
        select(tally.c.jobs, tally.c.changes, page.c.matches, *columns)
        .select_from(tally.outerjoin(page, true()))
        .order_by(page.c.publish_date.desc(), page.c.id.desc(), page.c.position)
    )
    return Precompiled(statement)


HEADER = (
    Job.reference_id,
    Job.title,
    Job.publish_date,
    Job.confidential,
    Job.status,
    Job.workplace_type,
    Job.applicant_locations,
    Job.questions,
    Job.updated_at,
)


PLACE = (
    Location.id.label("place_id"),
    Location.name,
    Location.description,
    Location.type,
    Location.latitude,
    Location.longitude,
)


# A list row: the employer's jobs (of the status) and changes, a search's matches, then the
# job's id and header, then one of its places.
_JOBS, _CHANGES, _MATCHES, ID_AT = 0, 1, 2, 3


PLACE_AT = ID_AT + 1 + len(HEADER)


FEED_AT = PLACE_AT - 1  # a row's updated_at: the last of the header


def headers_of(rows: list[tuple[Any, ...]]) -> list[Header]:
    """Rows of (job columns, place columns), a row per location, in order: the headers."""
    headers: list[Header] = []
    for row in rows:
        if row[ID_AT] is None:  # the row of an empty page, for its tally
            continue
        if not headers or headers[-1].id != row[ID_AT]:
            job_id, ref, title, published, confidential, status, kind, takes, asks, updated = row[
                ID_AT:PLACE_AT
            ]
            headers.append(
                Header(
                    job_id,
                    ref,
                    title,
                    published,
                    confidential,
                    status,
                    kind,
                    takes,
                    asks,
                    updated,
                    [],
                )
            )
        if row[PLACE_AT] is not None:  # a job without locations has one row, of NULLs
            headers[-1].locations.append(Place(*row[PLACE_AT : PLACE_AT + len(PLACE)]))
    return headers
