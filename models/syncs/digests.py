"""What a sync run's write leaves for its item's resend (C11): a digest, and the warnings.

An ATS resends its whole snapshot on a schedule, most items unchanged since the last run.
Checking an unchanged item costs what a write's check costs (its HTML cleaned, its places
resolved, C13's rules) only to find that nothing changes. A sync run's write of a job
therefore keeps (migration 0016) the digest of the item it wrote together with everything
that item's check depends on: the job's version after the write, the employer's plan and
compliance settings, the day, and the code of the rules and of the reference data's
migrations. A resent item whose digest matches the job's is unchanged, with the warnings kept
beside the digest (the write's, but for `location_added`, which only a write earns), and is
not checked again.

Any other write moves the version (every writer raises it, `models.jobs.rows`), as does a
deploy that changes a rule (the code's digest), the next day, or a change of plan or
compliance settings: the item is then checked in full, as it always was.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from models.db.entities import Employer
from models.jobs import warnings
from models.jobs import writes as jobs
from models.jobs.rows import Written

_MODELS = Path(__file__).parents[1]  # all of models/: every rule and migration


@functools.cache
def _code() -> bytes:
    """The digest of every module of the domain package and its migrations: what decides an
    item's check, read once a process."""
    code = hashlib.blake2b(digest_size=16)
    for path in sorted(_MODELS.rglob("*.py")):
        code.update(path.relative_to(_MODELS).as_posix().encode())
        code.update(path.read_bytes())
    return code.digest()


class Digests:
    """The digests of a batch's items, for one employer on one day."""

    def __init__(self, employer: Employer, today: date) -> None:
        self._base = hashlib.blake2b(_code(), digest_size=16)
        context = (employer.id, employer.plan, employer.compliance, employer.ontario25_plus)
        self._base.update(f"{context}|{today.isoformat()}|".encode())

    def _digest(self, version: int, item: str) -> str:
        digest = self._base.copy()
        digest.update(b"%d|" % version)
        digest.update(item.encode())
        return digest.hexdigest()

    def unchanged(self, last: Written, item: str) -> list[dict[str, Any]] | None:
        """The warnings of `item` (its JSON text as stored in its run) when it is what the
        job's last write (`last`) kept, so unchanged; else None, and it must be checked."""
        if last.digest is None or last.digest != self._digest(last.version, item):
            return None
        return orjson.loads(last.warnings) if last.warnings else []

    def kept(self, change: jobs.Change, item: str, answered: list[warnings.Warning]) -> jobs.Kept:
        """What the write of `change`, made of `item`, keeps for the item's resend: the
        warnings it answers then (`answered`: the write's but `location_added`, which only
        a write earns, C10)."""
        version = 1 if change.stored is None else change.stored.version + 1
        said = [w.as_dict() for w in answered]
        return jobs.Kept(self._digest(version, item), orjson.dumps(said).decode() if said else None)
