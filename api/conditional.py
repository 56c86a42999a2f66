"""Conditional GET of the sitemaps and feeds (C15, RFC 9110 section 13): a strong ETag and a
Last-Modified made from a stamp of the jobs a body shows (`models.jobs.feeds.Stamp`), read in
one statement, so a reader whose copy holds gets its 304 without a single job being read.

A stamp that a write still committing could leave behind (`models.jobs.feeds.settled`) makes
an ETag of its own that nothing matches later, and no Last-Modified: the copy made then may
lack that write, so it is never confirmed."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime

import falcon

from api.preconditions import entity_tags
from models.jobs.feeds import Stamp

# Raised when what a body says of the same jobs changes (its format), so no kept copy holds.
FORMAT = 1


@dataclass(frozen=True)
class Validators:
    etag: str
    last_modified: datetime | None  # whole seconds, as HTTP dates have them
    settled: bool = True  # False: no request is answered 304 (see the module's docstring)


def of_stamp(stamp: Stamp, *shape: object, settled: bool = True) -> Validators:
    """The validators of a body made from the jobs `stamp` stands for, and `shape`: all else
    its bytes depend on (the route, the language, the filters, the site's address)."""
    unique = None if settled else secrets.token_hex(16)
    seed = repr((FORMAT, stamp.count, stamp.changes, stamp.latest, shape, unique)).encode()
    latest = None if stamp.latest is None else stamp.latest.replace(microsecond=0)
    return Validators(tag(seed), latest, settled)


def tag(content: bytes) -> str:
    return '"' + hashlib.blake2b(content, digest_size=16).hexdigest() + '"'


def answered(
    req: falcon.Request, resp: falcon.Response, validators: Validators, cache_control: str
) -> bool:
    """Set the validators; True when the reader's copy holds and the answer is a 304.

    If-None-Match decides when sent (weak comparison, as RFC 9110 section 13.1.2 asks of
    it); otherwise If-Modified-Since, when it is a date."""
    resp.set_header("Cache-Control", cache_control)
    resp.set_header("ETag", validators.etag)
    if validators.last_modified is not None and validators.settled:
        resp.set_header("Last-Modified", format_datetime(validators.last_modified, usegmt=True))
    if _unchanged(req, validators):
        resp.status = 304
        return True
    return False


def _unchanged(req: falcon.Request, validators: Validators) -> bool:
    if not validators.settled:
        return False
    none_match = req.get_header("If-None-Match")
    if none_match is not None:
        if none_match.strip() == "*":
            return True
        tags = entity_tags(none_match) or []
        return any(tag == validators.etag for _weak, tag in tags)
    since = _date(req.get_header("If-Modified-Since"))
    return (
        since is not None
        and validators.last_modified is not None
        and validators.last_modified <= since
    )


def _date(value: str | None) -> datetime | None:
    """An HTTP date; None when absent or not a date (RFC 9110 says to ignore it then)."""
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when
