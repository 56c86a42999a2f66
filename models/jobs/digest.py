"""Proof of being in step (C24): a job's ETag, and the digest of an employer's jobs.

A system that keeps a copy of an employer's jobs holds, for each, its referenceId and the
ETag its last GET or write answered. The digest hashes those pairs per status, and per bucket
of referenceIds, so one call tells the client whether it holds the same set, and a second
names the bucket that differs. For that the server must know every job's ETag without
building its JSON: a job's ETag is derived from what is stored (its id, its version, the
employer's name the answer shows) rather than hashed from its body; at 200,000 jobs that is
one read of a covering index and a string per job (docs/benchmarks.md). The body is a function of
those: every write of a job raises its version (`models.jobs.rows`, upkeep, takedowns, sync
archiving), a rename of the employer changes the name, and `READ_SHAPE` changes with the
read shape itself (`api.representations.job`, pinned by tests/api/test_job_digest.py).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, Integer, String, Table, bindparam, select

from models.db.entities import Job
from models.db.fast_reads import Precompiled

_jobs = cast(Table, Job.__table__)

# The read shape's own version: raised whenever `api.representations.job` answers other
# members or writes them otherwise, so that no client keeps a job as unchanged across it.
READ_SHAPE = "2"  # 2: C21's questions

BUCKETS = 256  # a bucket: the first byte of SHA-256 of the job's key
EMPTY = hashlib.sha256(b"").hexdigest()


def etag(job_id: int, version: int, employer_name: str) -> str:
    """The strong validator of a job's read representation: what GET /jobs/{id} answers,
    and each write of it (C10): `"id-version-shown"`, where `shown` stands for the read
    shape and the employer's name (`shown`)."""
    return f'"{job_id}-{version}-{shown(employer_name)}"'


@functools.lru_cache(maxsize=1024)
def shown(employer_name: str) -> str:
    """What a job's body holds beyond the job: the read shape's version and the employer's
    name, as 8 hex digits (a rename gives every job a new ETag)."""
    stated = f"{READ_SHAPE}\n{employer_name}".encode()
    return hashlib.blake2b(stated, digest_size=4).hexdigest()


def bucket_of(reference_id: str | None, job_id: int) -> int:
    """A job's bucket: the first byte of SHA-256 of its referenceId (UTF-8), or of its id in
    decimal when it has none."""
    key = reference_id if reference_id is not None else str(job_id)
    return hashlib.sha256(key.encode()).digest()[0]


def line(reference_id: str | None, tag: str) -> str:
    """A job's line in a digest: its referenceId ("" when none), a tab, its ETag, a line feed.
    A referenceId is one line of text (C4): it holds no tab or line feed."""
    return f"{reference_id or ''}\t{tag}\n"


class Held(NamedTuple):
    """One job of a bucket's listing."""

    line: str
    reference_id: str | None
    id: int
    etag: str


@dataclass(frozen=True, slots=True)
class Part:
    """A status's or a bucket's share of the digest: how many jobs, and SHA-256 (hex) of
    their lines sorted (by code point: UTF-8 byte order), joined."""

    count: int
    hash: str


@dataclass(frozen=True)
class Status:
    status: str
    whole: Part
    buckets: dict[int, Part]  # the buckets that hold jobs, in order; empty unless asked


Row = tuple[str, str | None, int, int]  # status, referenceId, id, version


def _part(lines: list[str]) -> Part:
    """`lines` sorted and hashed (sorted here: a line per job, each unique, since its ETag
    holds the job's id)."""
    if not lines:
        return Part(0, EMPTY)
    lines.sort()
    return Part(len(lines), hashlib.sha256("".join(lines).encode()).hexdigest())


def held(connection: Connection, employer_id: int, status: str | None = None) -> list[Row]:
    """The employer's jobs (of `status` only, when given) as the digest reads them: one read
    of the covering index (migration 0032), on the driver. At 200,000 jobs each object made
    per job counts, so what follows makes one string per job and no more (docs/benchmarks.md)."""
    params = {"employer_id": employer_id, "status": status}
    return cast(list[Row], _statement(status is not None).all(connection, params))


@functools.cache
def _statement(one_status: bool) -> Precompiled:
    columns = (_jobs.c.status, _jobs.c.reference_id, _jobs.c.id, _jobs.c.version)
    statement: Any = select(*columns).where(
        _jobs.c.employer_id == bindparam("employer_id", type_=Integer)
    )
    if one_status:
        statement = statement.where(_jobs.c.status == bindparam("status", type_=String))
    return Precompiled(statement)


def statuses(rows: list[Row], employer_name: str, names: tuple[str, ...]) -> list[Status]:
    """Each status's count and hash, in the order of `names`."""
    tail = shown(employer_name)
    lines: dict[str, list[str]] = {name: [] for name in names}
    for state, ref, job_id, version in rows:  # etag() and line(), without calls per job
        lines[state].append(f'{ref or ""}\t"{job_id}-{version}-{tail}"\n')
    return [Status(name, _part(lines[name]), {}) for name in names]


def with_buckets(rows: list[Row], employer_name: str, status: str) -> Status:
    """A status's count and hash, and each bucket's that holds jobs (`rows`: its jobs)."""
    tail = shown(employer_name)
    split: dict[int, list[str]] = {}
    everything: list[str] = []
    for _state, ref, job_id, version in rows:
        text = f'{ref or ""}\t"{job_id}-{version}-{tail}"\n'
        everything.append(text)
        key = ref if ref is not None else str(job_id)
        split.setdefault(hashlib.sha256(key.encode()).digest()[0], []).append(text)
    parts = {b: _part(split[b]) for b in sorted(split)}
    return Status(status, _part(everything), parts)


def in_bucket(rows: list[Row], employer_name: str, bucket: int) -> tuple[Part, list[Held]]:
    """A bucket's count and hash, and its jobs in the order of their lines."""
    found = []
    for _state, ref, job_id, version in rows:
        key = ref if ref is not None else str(job_id)  # bucket_of(), without a call per job
        if hashlib.sha256(key.encode()).digest()[0] == bucket:
            tag = etag(job_id, version, employer_name)
            found.append(Held(line(ref, tag), ref, job_id, tag))
    found.sort()
    return _part([h.line for h in found]), found
