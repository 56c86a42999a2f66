"""What the job list counts with (C6): the employers' job counts that the database keeps in
job_tallies (migration 0007), and the exact totals of searches a web process keeps, each
under the state of the employer's jobs it was counted in."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnClause, Connection, Subquery, case, func, literal_column, select, text

from models.db.entities import JobTally

# More would hold little more: an employer's searches are few, and a total is recounted at
# the next change of its jobs anyway. A `q` longer than KEPT_Q is counted every time.
KEPT_SEARCHES = 4096
KEPT_Q = 200
# In the SQL, not a parameter: a precompiled statement binds only the values it is given.
ZERO: ColumnClause[int] = literal_column("0")


def of_employer(employer: Any, status: Any | None) -> Subquery:
    """One row: the employer's jobs (of `status`, when given) and the sum of its changes."""
    counted = JobTally.jobs if status is None else case((JobTally.status == status, JobTally.jobs))
    return (
        select(
            func.coalesce(func.sum(counted), ZERO).label("jobs"),
            func.coalesce(func.sum(JobTally.changes), ZERO).label("changes"),
        )
        .where(JobTally.employer_id == employer)
        .subquery("tally")
    )


def rebuild(connection: Connection) -> None:
    """Count the jobs again, for a load that went around the triggers (the bench's COPY),
    with no other writer at work. Every employer's changes grow by one at least, so no
    search total a process keeps is taken for one of the new state."""
    connection.execute(text("UPDATE job_tallies SET jobs = 0, changes = changes + 1"))
    connection.execute(
        text(
            "INSERT INTO job_tallies (employer_id, status, jobs, changes) "
            "SELECT employer_id, status, count(*), count(*) FROM jobs GROUP BY employer_id, status"
        )
    )


@dataclass(frozen=True, slots=True)
class Counted:
    """A search's total, counted when the employer's changes summed to `changes`; `jobs`, the
    employer's jobs of the search's status then, says how thinly the matches are spread, and
    `reach` how much further back than that spread they were found (models.jobs.writes)."""

    changes: int
    total: int
    jobs: int
    reach: int = 1


class SearchTotals:
    """The exact totals of an employer's searches, least recently used first out. A total is
    right while the employer's changes still sum to what they did when it was counted: that
    sum only grows, with every change that could move it."""

    def __init__(self, max_entries: int = KEPT_SEARCHES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, str | None, str], Counted] = OrderedDict()
        self._lock = threading.Lock()  # gunicorn's sync workers have one thread; others may not

    def get(self, employer_id: int, status: str | None, q: str) -> Counted | None:
        with self._lock:
            counted = self._entries.get((employer_id, status, q))
            if counted is not None:
                self._entries.move_to_end((employer_id, status, q))
            return counted

    def put(self, employer_id: int, status: str | None, q: str, counted: Counted) -> None:
        if len(q) > KEPT_Q or self.max_entries <= 0:
            return
        with self._lock:
            self._entries[(employer_id, status, q)] = counted
            self._entries.move_to_end((employer_id, status, q))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
