"""Application bodies: JSON, or multipart/form-data with a file part `resume` (C8)."""

from __future__ import annotations

import codecs
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from typing import Any

import falcon

from api.body import MiB, malformed, media_type, parse_json, read_bytes
from api.errors import Problem
from models.applications import Upload

APPLICATION_BODY_LIMIT = 10 * MiB
FORM_TYPES = ("application/json", "multipart/form-data")
# The form has six fields (name, email, phone, coverLetter, resume and the honeypot website);
# a body of more parts is no application, and the email parser is slow on many parts.
MAX_PARTS = 32
# The email parser is slow on a part's header parameters (docs/benchmarks.md): a header of
# megabytes would hold a worker past gunicorn's timeout. A form's headers take a few hundred
# bytes; the parts' headers together may take this many.
MAX_PART_HEADERS = 8 * 1024


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
    try:
        return _fields(parser.parsebytes(head + data))
    except RecursionError:  # comments nested thousands deep in a part's header
        raise unreadable_form() from None


def _fields(message: EmailMessage) -> dict[str, Any]:
    if not message.is_multipart() or message.defects:
        raise unreadable_form()
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
        raise malformed(detail)
    try:
        value = raw.decode(charset)
        value.encode("utf-8")
    except UnicodeError:
        detail = f"The form field {name!r} is not valid {charset} text."
        raise malformed(detail) from None
    return newlines(value)


def newlines(value: str) -> str:
    """Line breaks as LF. A browser sends a textarea's breaks as CRLF but counts each as one
    character against its maxlength (HTML: form submission, and maxlength): the cover letter's
    10,000 (C8) must count them as the form did, or a letter the form allowed is refused."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


def unreadable_form() -> Problem:
    return malformed("The multipart/form-data body could not be read.")


def check_part_count(boundary: str | None, data: bytes) -> None:
    """Refuse a body of more than MAX_PARTS parts before the email parser reads it (C1, C8).
    Its delimiters are lines (broken at CR, LF or CRLF) that start with `--boundary`: counting
    every such line, the closing one too, can only overcount."""
    if boundary is None or not boundary.isascii():
        raise unreadable_form()  # no boundary, or one no line of bytes can match: no parts
    mark = b"--" + boundary.encode("ascii")
    lines = data.count(b"\n" + mark) + data.count(b"\r" + mark) + int(data.startswith(mark))
    if lines > MAX_PARTS + 1:
        raise malformed(
            f"The multipart/form-data body has more than {MAX_PARTS} parts; the form has six."
        )
    if _header_bytes(data, mark) > MAX_PART_HEADERS:
        raise malformed(
            f"The parts' headers of the multipart/form-data body are over {MAX_PART_HEADERS} "
            "bytes together."
        )


def _header_bytes(data: bytes, mark: bytes) -> int:
    """The bytes of the parts' headers (from each delimiter line to the blank line after it),
    counted until they pass MAX_PART_HEADERS. Like the count of parts, it can only overcount."""
    total, at = 0, data.find(mark)
    while at != -1 and total <= MAX_PART_HEADERS:
        start = data.find(b"\n", at) + 1
        if start == 0 or data.startswith(b"--", at + len(mark)):
            break  # the closing delimiter, or no line after it
        window = data[start : start + MAX_PART_HEADERS - total + 3]
        ends = [i for i in (window.find(b"\n\n"), window.find(b"\n\r\n")) if i != -1]
        if not ends:
            return MAX_PART_HEADERS + 1
        total += min(ends) + 1
        at = data.find(mark, start + min(ends))
    return total
