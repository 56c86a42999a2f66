"""The change feeds' query (C10): `sort`, `updatedSince`/`receivedSince`, the opaque cursor,
and the `paging` member of a feed's page.

A cursor is a position, (time, id), with the feed and the employer it belongs to and a
checksum. It is opaque so that clients resume from it rather than build positions, and the
checksum tells a cursor cut short or edited from a real one. It is not secret: a forged one
could only name a position in the employer's own feed, which `updatedSince` names as well.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

import falcon

from api import query
from models.core import checks
from models.core.errors import FieldError
from models.db.feed import Position

# Before the first change anyone made: a walk without `updatedSince` starts here.
ORIGIN = Position(datetime(1970, 1, 1, tzinfo=UTC), 0)
_CHECKSUM_KEY = b"jobpost change feed cursor v1"
_EPOCH = ORIGIN.at


@dataclass(frozen=True)
class Feed:
    """A feed request: where it starts and how many it takes."""

    start: Position
    page_size: int


def instant(req: falcon.Request, name: str, errors: list[FieldError]) -> datetime | None:
    """An RFC 3339 date-time with its offset (`2026-11-25T15:05:09.962Z`), as an aware UTC
    instant. A `+` sent without percent-encoding arrives as a space, and is read as the `+`
    it was."""
    raw = query.param(req, name, errors)
    if raw is None:
        return None
    text = raw[:19] + raw[19:].replace(" ", "+")
    try:
        return checks.instant(text, name)
    except checks.Invalid as e:
        errors.append(e.error)
        return None


def sort(req: falcon.Request, wanted: str, errors: list[FieldError]) -> bool:
    """Whether the request asks for the feed: `sort` is absent or exactly `wanted`."""
    raw = query.param(req, "sort", errors)
    if raw is None:
        return False
    if raw != wanted:
        errors.append(FieldError("sort", "out_of_range", f"sort must be {wanted}."))
        return False
    return True


def request(
    req: falcon.Request,
    kind: str,
    employer_id: int,
    since: datetime | None,
    errors: list[FieldError],
) -> Feed:
    """The feed's start (the cursor's position, or `since`) and page size; `page` has no
    place in a feed."""
    if query.param(req, "page", errors) is not None:
        message = "page cannot be used with sort; follow paging.next (its cursor) instead."
        errors.append(FieldError("page", "out_of_range", message))
    page_size = query.page_size(req, errors)
    raw = query.param(req, "cursor", errors)
    start = ORIGIN if since is None else Position(since, 0)
    if raw is not None:
        position = decode(raw, kind, employer_id)
        if position is None:
            message = "cursor is not one this feed gave; start again without it."
            errors.append(FieldError("cursor", "invalid_format", message))
        else:
            start = position
    return Feed(start, page_size)


def encode(kind: str, employer_id: int, position: Position) -> str:
    micros = (position.at - _EPOCH) // _MICROSECOND
    payload = f"{kind}.{employer_id}.{micros}.{position.id}"
    token = f"{payload}.{_checksum(payload)}".encode()
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def decode(token: str, kind: str, employer_id: int) -> Position | None:
    """The position of a cursor of this feed and employer; None for anything else."""
    try:
        padded = token + "=" * (-len(token) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    payload, _, checksum = text.rpartition(".")
    if not hmac.compare_digest(checksum.encode(), _checksum(payload).encode()):
        return None
    parts = payload.split(".")
    if len(parts) != 4 or parts[0] != kind or parts[1] != str(employer_id):
        return None
    try:
        return Position(_EPOCH + int(parts[2]) * _MICROSECOND, int(parts[3]))
    except (ValueError, OverflowError):
        return None


def paging(
    req: falcon.Request,
    public_base_url: str,
    kind: str,
    employer_id: int,
    page_size: int,
    resume: Position,
    filters: dict[str, str | None],
) -> dict[str, object]:
    """`{"pageSize", "next"}`: `next` carries the supplied filters, then sort, pageSize and
    the cursor (C10); never null, at the end of the feed it is where to resume later."""
    carried = {k: v for k, v in filters.items() if v is not None}
    sort_by = "updatedAt" if kind == "jobs" else "receivedAt"
    link = urlencode(
        {
            **carried,
            "sort": sort_by,
            "pageSize": page_size,
            "cursor": encode(kind, employer_id, resume),
        }
    )
    following = f"{public_base_url}{req.path}?{link}"
    query.links(req, next=following)
    return {"pageSize": page_size, "next": following}


def _checksum(payload: str) -> str:
    return hashlib.blake2b(payload.encode(), key=_CHECKSUM_KEY, digest_size=8).hexdigest()


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH
