"""Application bodies: JSON, or multipart/form-data with a file part `resume` (C8)."""

from __future__ import annotations

import codecs
from email import policy
from email.message import Message
from email.parser import BytesParser
from typing import Any

import falcon

from api.body import MiB, media_type, parse_json, read_bytes
from api.errors import Problem
from models.applications import Upload

APPLICATION_BODY_LIMIT = 10 * MiB
FORM_TYPES = ("application/json", "multipart/form-data")
# The form has six fields (name, email, phone, coverLetter, resume and the honeypot website);
# a body of more parts is no application, and the email parser takes seconds per 100,000 parts.
MAX_PARTS = 32


def read_raw(req: falcon.Request) -> tuple[str, bytes]:
    """Size first (413), then media type (415); the parsing comes later (400)."""
    data = read_bytes(req, APPLICATION_BODY_LIMIT)
    kind = media_type(req)
    if kind not in FORM_TYPES:
        raise Problem(
            415,
            "unsupported_media_type",
            "Send the application as application/json or multipart/form-data.",
        )
    return kind, data


def parse(req: falcon.Request, kind: str, data: bytes) -> dict[str, Any]:
    if kind == "application/json":
        return parse_json(data)
    return parse_multipart(req.content_type or "", data)


def parse_multipart(content_type: str, data: bytes) -> dict[str, Any]:
    """Fields as strings, the `resume` part as an Upload (an empty file part is no file)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    parser = BytesParser(policy=policy.HTTP)
    check_part_count(parser.parsebytes(head).get_boundary(), data)
    message = parser.parsebytes(head + data)
    if not message.is_multipart() or message.defects:
        raise unreadable()
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        raw = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None or name == "resume":
            if raw or filename:
                fields[name] = Upload(filename, raw) if raw else None
            continue
        fields[name] = text(name, part, raw)
    return fields


def text(name: str, part: Message, raw: bytes) -> str:
    """A text part, decoded strictly in the charset it names (UTF-8 when it names none): an
    unknown charset, a codec that is no text encoding (rot13, base64), bytes that are not in
    the charset, or text no UTF-8 can hold (a lone surrogate, from UTF-7) are 400 (C1, C8)."""
    charset = part.get_content_charset() or "utf-8"
    try:
        known = codecs.lookup(charset)._is_text_encoding
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        known = False
    if not known:
        detail = f"The form field {name!r} names charset {charset!r}, not a known text encoding."
        raise Problem(400, "malformed_json", detail)
    try:
        value = raw.decode(charset)
        value.encode("utf-8")
    except UnicodeError:
        detail = f"The form field {name!r} is not valid {charset} text."
        raise Problem(400, "malformed_json", detail) from None
    return value


def unreadable() -> Problem:
    return Problem(400, "malformed_json", "The multipart/form-data body could not be read.")


def check_part_count(boundary: str | None, data: bytes) -> None:
    """Refuse a body of more than MAX_PARTS parts before the email parser reads it (C1, C8).
    Its delimiters are lines (broken at CR, LF or CRLF) that start with `--boundary`: counting
    every such line, the closing one too, can only overcount."""
    if boundary is None or not boundary.isascii():
        raise unreadable()  # no boundary, or one no line of bytes can match: no parts
    mark = b"--" + boundary.encode("ascii")
    lines = data.count(b"\n" + mark) + data.count(b"\r" + mark) + int(data.startswith(mark))
    if lines > MAX_PARTS + 1:
        raise Problem(
            400,
            "malformed_json",
            f"The multipart/form-data body has more than {MAX_PARTS} parts; the form has six.",
        )
