"""Writing JSON responses, and the cache validators of the reference lists (C3)."""

from __future__ import annotations

import hashlib
from typing import Any

import falcon
import orjson

from models.core.errors import NotFound

INT32_MAX = 2**31 - 1


def send_json(resp: falcon.Response, body: Any, status: int = 200) -> bytes:
    """`body` as JSON; the bytes sent, for a validator of them."""
    data = orjson.dumps(body)
    resp.status, resp.data, resp.content_type = status, data, "application/json"
    return data


def send_cacheable(req: falcon.Request, resp: falcon.Response, body: Any) -> None:
    """Public, an hour, with an ETag; a matching If-None-Match is a 304 (C3)."""
    data = orjson.dumps(body)
    etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
    send_validated(req, resp, data, etag, "public, max-age=3600")


def send_validated(
    req: falcon.Request, resp: falcon.Response, data: bytes, etag: str, cache_control: str
) -> None:
    """JSON with its ETag; a request whose If-None-Match matches gets a 304 without it."""
    resp.set_header("Cache-Control", cache_control)
    resp.set_header("ETag", etag)
    wanted = [t.strip() for t in (req.get_header("If-None-Match") or "").split(",")]
    if etag in wanted or f"W/{etag}" in wanted or "*" in wanted:
        resp.status = 304
        return
    resp.data = data
    resp.content_type = "application/json"


def int32(raw: str) -> int | None:
    """`raw` as a non-negative Int32, or None."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 10 and int(raw) <= INT32_MAX:
        return int(raw)
    return None


def path_id(raw: str, noun: str = "job") -> int:
    """A path id; one that is not an Int32 names nothing, so it is a 404 (C4)."""
    value = int32(raw)
    if value is None:
        raise NotFound(f"No {noun} has id {raw}.")
    return value
