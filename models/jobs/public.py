"""What the public job page asks before it renders a job (C8, C13): whether the job is public
(active), and the version, employer name and language its kept page depends on. One
statement, so a kept page costs one round trip, as GET one job does (`api.cache`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlalchemy import Connection, Integer, Table, bindparam, select

from models.db.entities import Employer, Job
from models.db.fast_reads import Precompiled

_jobs = cast(Table, Job.__table__)
_employers = cast(Table, Employer.__table__)


@dataclass(frozen=True)
class PublicState:
    version: int  # raised by every write of the job (models.jobs.rows)
    employer_name: str  # the employer's name is not the job's: a rename leaves the version
    language: str


_STATE = Precompiled(
    select(_jobs.c.version, _employers.c.name, _jobs.c.language)
    .select_from(_jobs.join(_employers, _employers.c.id == _jobs.c.employer_id))
    .where(_jobs.c.id == bindparam("job_id", type_=Integer), _jobs.c.status == "active")
)


def public_state(connection: Connection, job_id: int) -> PublicState | None:
    """The active job's state; None when no active job has this id."""
    row = _STATE.first(connection, {"job_id": job_id})
    return None if row is None else PublicState(*row)
