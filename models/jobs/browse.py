"""The public search (C17): the open jobs that pass the public filters (`feeds.Filters`), by
newest or by closing date, a page at a time.

Paging is by page number over a stable order (the sort's date, then the id), so a page's
link names the same jobs while they stay open. A page reads one job more than it shows to
know whether another page follows: no count of every match, which a common word at the
seeded million would cost on each page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import cast

from sqlalchemy import Connection, Table

from models.db.entities import Job
from models.jobs import feeds
from models.jobs.feeds import Filters, OpenJob

_jobs = cast(Table, Job.__table__)

NEWEST, CLOSING = "newest", "closing"
SORTS = (NEWEST, CLOSING)
PAGE_SIZE = 20
MAX_PAGE = 500  # 10,000 results: deeper than anyone reads, and an offset stays cheap


@dataclass(frozen=True)
class Results:
    jobs: list[OpenJob]
    page: int
    more: bool  # whether a next page holds a job


def search(
    connection: Connection,
    filters: Filters,
    today: date,
    *,
    sort: str = NEWEST,
    page: int = 1,
    page_size: int = PAGE_SIZE,
) -> Results:
    """A page of the open jobs that pass `filters`: newest published first, or soonest
    closing first, then by id (newest: the highest first)."""
    if sort == CLOSING:
        order = [_jobs.c.close_date.asc(), _jobs.c.id.asc()]
    else:
        order = [_jobs.c.publish_date.desc(), _jobs.c.id.desc()]
    where = filters.conditions(today, grams=connection.dialect.name == "postgresql")
    # A result shows no category: the page reads none.
    offset = (page - 1) * page_size
    found = feeds.read_jobs(connection, where, order, page_size + 1, offset, with_categories=False)
    return Results(found[:page_size], page, len(found) > page_size)
