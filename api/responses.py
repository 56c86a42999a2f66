"""Writing JSON responses, and the cache validators of the reference lists (C3)."""

from __future__ import annotations

import hashlib
from typing import Any

import falcon
import orjson

from models.errors import NotFound

INT32_MAX = 2**31 - 1


def send_json(resp: falcon.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.data = orjson.dumps(body)
    resp.content_type = "application/json"


def send_cacheable(req: falcon.Request, resp: falcon.Response, body: Any) -> None:
    """Public, an hour, with an ETag; a matching If-None-Match is a 304 (C3)."""
    data = orjson.dumps(body)
    etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
    resp.set_header("Cache-Control", "public, max-age=3600")
    resp.set_header("ETag", etag)
    wanted = [t.strip() for t in (req.get_header("If-None-Match") or "").split(",")]
    if etag in wanted or f"W/{etag}" in wanted or "*" in wanted:
        resp.status = 304
        return
    resp.data = data
    resp.content_type = "application/json"


def path_id(raw: str, noun: str = "job") -> int:
    """A path id; one that is not an Int32 names nothing, so it is a 404 (C4)."""
    if not (raw.isascii() and raw.isdigit()) or int(raw) > INT32_MAX:
        raise NotFound(f"No {noun} has id {raw}.")
    return int(raw)
