"""Reading request bodies exactly: size first (413), then media type (415), then JSON (400)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import falcon

from api.errors import Problem

MiB = 1024 * 1024
JOB_BODY_LIMIT = MiB  # C1: the request size limit the interface leaves open
# Arrays and objects a body may nest (C1): a job needs 3 levels, a sync run's body 4. Every
# later step (the Idempotency-Key's canonical form, a sync item's stored text) is then safe
# from the recursion limits of Python and orjson (255), whatever the parser accepts.
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")  # from a "\\ud800" escape: no UTF-8 holds it
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where one may come from


def read_bytes(req: falcon.Request, limit: int) -> bytes:
    """The raw body, refusing more than `limit` bytes, chunked bodies included (C1 413).
    Read once: a second call (after the Idempotency-Key layer's, C10) gets the same bytes."""
    kept: bytes | None = getattr(req.context, "raw_body", None)
    if kept is None:
        kept = req.context.raw_body = _read_bytes(req, limit)
    return kept


def _read_bytes(req: falcon.Request, limit: int) -> bytes:
    if req.content_length is not None and req.content_length > limit:
        raise too_large(limit)
    stream = req.bounded_stream if req.content_length is not None else req.stream
    if req.content_length is None and not _chunked(req):
        return b""
    try:
        data: bytes = stream.read(limit + 1)
    except Exception:  # the server's own framing error: a broken chunk, a body cut short
        raise unreadable() from None
    if len(data) > limit:
        raise too_large(limit)
    if req.content_length is not None and len(data) < req.content_length:
        raise unreadable()  # the client went away mid-body: nothing of it is acted on
    return data


def malformed(detail: str) -> Problem:
    """400 malformed_json: a body, JSON or multipart, that cannot be read as one (C1)."""
    return Problem(400, "malformed_json", detail)


def unreadable() -> Problem:
    return malformed(
        "The body could not be read whole: it ended early, or its chunked encoding is broken."
    )


def _chunked(req: falcon.Request) -> bool:
    return "chunked" in (req.get_header("Transfer-Encoding") or "").lower()


def too_large(limit: int) -> Problem:
    return Problem(413, "payload_too_large", f"The body is over {limit // MiB} MiB.")


def media_type(req: falcon.Request) -> str:
    return (req.content_type or "").split(";", 1)[0].strip().lower()


def read_json(
    req: falcon.Request, *, limit: int = JOB_BODY_LIMIT, optional: bool = False
) -> dict[str, Any]:
    """The body as a JSON object. With `optional`, an absent body is {} and needs no type;
    an absent body of an overridden POST needs none either, and is then malformed (C1)."""
    data = read_bytes(req, limit)
    if optional and not data:
        return {}
    if not data and getattr(req.context, "overridden", False):
        return parse_json(data)
    if media_type(req) != "application/json":
        raise Problem(415, "unsupported_media_type", "Send the body as application/json.")
    return parse_json(data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere (keys too) holds an unpaired surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


# RFC 8259 section 8.1: senders must not add one, parsers may ignore it. Files saved by
# Windows editors start with it, and a client sending such a file as it is deserves a job.
UTF8_BOM = b"\xef\xbb\xbf"


def too_deep() -> Problem:
    return malformed(f"The body nests arrays and objects more than {MAX_DEPTH} levels deep.")


def nests_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value`, counted level by
    level (no recursion): the outermost object is level 1."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [
            child
            for parent in level
            for child in (parent.values() if isinstance(parent, dict) else parent)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def parse_json(data: bytes) -> dict[str, Any]:
    """Parse with numbers as Decimal (never through floats); hostile input is a 400 (C4),
    a body nested more than MAX_DEPTH levels too (C1)."""
    try:
        text = data.removeprefix(UTF8_BOM).decode("utf-8")
        value = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
        if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
            raise ValueError("unpaired surrogate")
    except (UnicodeDecodeError, ValueError):
        raise malformed("The body is not valid UTF-8 JSON.") from None
    except RecursionError:  # nested deeper than the parser goes: far beyond MAX_DEPTH
        raise too_deep() from None
    if not isinstance(value, dict):
        raise malformed("The body must be a JSON object.")
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and nests_deeper(value):
        raise too_deep()
    return value


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def parse_json_streamed(
    data: bytes, member: str, pack: Callable[[Any], Any], *, most: int
) -> dict[str, Any]:
    """parse_json for a body whose `member` is a long array (a sync run's `jobs`): each of
    its elements is parsed alone and handed to `pack` (which keeps it small, as its JSON
    text), so the parse holds the body's text, the packed elements and one element's values,
    not every value at once (Python's objects take 20 to 30 times the JSON they come from).
    Past `most` elements the rest are read and dropped: the array is refused as too long."""
    try:
        text = data.removeprefix(UTF8_BOM).decode("utf-8")
        return _Streamed(text, member, pack, most).body()
    except (UnicodeDecodeError, ValueError, StopIteration, IndexError):
        raise malformed("The body is not valid UTF-8 JSON.") from None
    except RecursionError:
        raise too_deep() from None


class _Streamed:
    """The outer object read member by member with the json module's own scanners."""

    def __init__(self, text: str, member: str, pack: Callable[[Any], Any], most: int) -> None:
        self.text, self.member, self.pack, self.most = text, member, pack, most
        decoder = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constant)
        self.scan = decoder.scan_once  # type: ignore[attr-defined]
        self.surrogates = bool(_SURROGATE_ESCAPE.search(text))

    def skip(self, at: int) -> int:
        end: int = _WHITESPACE.match(self.text, at).end()  # type: ignore[union-attr]
        return end

    def expect(self, at: int, char: str) -> int:
        if self.text[at] != char:
            raise ValueError(f"expected {char!r} at {at}")
        return self.skip(at + 1)

    def value(self, at: int, outer_levels: int) -> tuple[Any, int]:
        """The value at `at`, inside `outer_levels` levels, checked as parse_json checks."""
        value, end = self.scan(self.text, at)
        if self.surrogates and _has_lone_surrogate(value):
            raise ValueError("unpaired surrogate")
        if nests_deeper(value, MAX_DEPTH - outer_levels):
            raise RecursionError("too deep")
        return value, end

    def body(self) -> dict[str, Any]:
        at = self.skip(0)
        if not self.text.startswith("{", at):
            raise malformed("The body must be a JSON object.")
        at = self.skip(at + 1)
        found: dict[str, Any] = {}
        if self.text.startswith("}", at):
            return self.end(found, at)
        while True:
            if self.text[at] != '"':
                raise ValueError(f"expected a member name at {at}")
            name, at = json.decoder.scanstring(self.text, at + 1)  # type: ignore[attr-defined]
            if self.surrogates and _has_lone_surrogate(name):
                raise ValueError("unpaired surrogate")
            at = self.expect(self.skip(at), ":")
            if name == self.member and self.text.startswith("[", at):
                found[name], at = self.elements(at)
            else:
                found[name], at = self.value(at, 1)
            at = self.skip(at)
            if self.text[at] == "}":
                return self.end(found, at)
            at = self.expect(at, ",")

    def elements(self, at: int) -> tuple[list[Any], int]:
        at = self.skip(at + 1)
        kept: list[Any] = []
        if self.text.startswith("]", at):
            return kept, at + 1
        while True:
            element, at = self.value(at, 2)
            if len(kept) <= self.most:
                kept.append(self.pack(element))
            at = self.skip(at)
            if self.text[at] == "]":
                return kept, at + 1
            at = self.expect(at, ",")

    def end(self, found: dict[str, Any], at: int) -> dict[str, Any]:
        if self.skip(at + 1) != len(self.text):
            raise ValueError("extra data after the body")
        return found
