"""If-Match and If-None-Match on job writes (C10, RFC 9110 section 13).

A write's precondition is evaluated against the job as the write locked it (`models.jobs.writes`),
inside the write's transaction: of two writers sending the same If-Match, the second finds
the first one's job, whose ETag no longer matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import falcon

from api.auth import access_of
from models.core.errors import PreconditionFailed
from models.jobs import digest as job_digest
from models.jobs.rows import StoredJob

# An entity-tag (RFC 9110 section 8.8.3): the strong ones are compared, weak ones never match.
_TAG = re.compile(r'[ \t]*(W/)?("[\x21\x23-\x7e\x80-\xff]*")[ \t]*')
ANY = "*"


def entity_tags(value: str) -> list[tuple[bool, str]] | None:
    """The (weak, tag) pairs of a list of entity-tags, or None when `value` is not one
    (empty elements, which the list syntax allows, are skipped)."""
    tags: list[tuple[bool, str]] = []
    for element in _elements(value):
        match = _TAG.fullmatch(element)
        if match is None:
            return None
        tags.append((match[1] is not None, match[2]))
    return tags or None


def _elements(value: str) -> list[str]:
    """`value` split at the commas outside quotes (an entity-tag may hold a comma)."""
    elements, start, quoted = [], 0, False
    for i, char in enumerate(value):
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            elements.append(value[start:i])
            start = i + 1
    elements.append(value[start:])
    return [e for e in elements if e.strip(" \t")]


@dataclass(frozen=True)
class Preconditions:
    """What a write's headers require of the job it names, and how to learn its ETag."""

    if_match: str | None  # the header as sent; None when absent
    create_only: bool  # If-None-Match: * on PUT /jobs
    etag_of: Callable[[StoredJob], str]

    @property
    def any(self) -> bool:
        return self.if_match is not None or self.create_only

    def check(self, job: StoredJob | None) -> None:
        """Raise PreconditionFailed unless the headers hold for `job` (None: no such job)."""
        if self.create_only and job is not None:
            raise PreconditionFailed(
                "If-None-Match: * creates only, and a job has this referenceId.", self.etag_of(job)
            )
        if self.if_match is None:
            return
        if job is None:
            raise PreconditionFailed("If-Match names a job, and no job has this referenceId.")
        if self.if_match.strip(" \t") == ANY:
            return
        etag = self.etag_of(job)
        tags = entity_tags(self.if_match) or []
        if not any(not weak and tag == etag for weak, tag in tags):
            raise PreconditionFailed("If-Match does not match the job's current ETag.", etag)


def of_request(req: falcon.Request, *, create_only_allowed: bool = False) -> Preconditions:
    """The preconditions of a job write; If-None-Match counts only where `create_only_allowed`
    (PUT /jobs), and is ignored on the other writes (C10)."""
    none_match = req.get_header("If-None-Match") if create_only_allowed else None
    return Preconditions(
        if_match=req.get_header("If-Match"),
        create_only=none_match is not None and none_match.strip(" \t") == ANY,
        etag_of=lambda job: _etag(req, job),
    )


def _etag(req: falcon.Request, job: StoredJob) -> str:
    """The ETag a GET of `job` answers, from the job as locked: its id and version, and the
    employer's name (`models.jobs.digest.etag`)."""
    return job_digest.etag(job.id, job.version, access_of(req).employer_name)
