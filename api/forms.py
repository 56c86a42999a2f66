"""Application bodies: JSON, or multipart/form-data with a file part `resume` (C8)."""

from __future__ import annotations

import codecs
import io
from typing import Any
from urllib.parse import unquote

import falcon
from falcon.media.multipart import MultipartForm, MultipartFormHandler, MultipartParseOptions

from api.body import MiB, malformed, media_type, parse_json, read_bytes
from api.errors import Problem
from models.applications.service import Upload

APPLICATION_BODY_LIMIT = 10 * MiB
FORM_TYPES = ("application/json", "multipart/form-data")
# The form has seven fields (name, email, phone, coverLetter, resume, the honeypot website and
# the one-time idempotencyKey); a body of more parts is no application.
MAX_PARTS = 32
# The longest part header a browser sends, the résumé's with a filename of 255 four-byte
# characters and its type, takes about 1.3 KB; a part's headers may take this many bytes.
MAX_PART_HEADERS = 2 * 1024


def _form_handler() -> MultipartFormHandler:
    options = MultipartParseOptions()
    options.max_body_part_count = MAX_PARTS
    options.max_body_part_headers_size = MAX_PART_HEADERS
    # The body is at most APPLICATION_BODY_LIMIT already; the résumé's 5 MiB is a 422 (C8).
    options.max_body_part_buffer_size = APPLICATION_BODY_LIMIT
    return MultipartFormHandler(options)


FORM_HANDLER = _form_handler()


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
    try:
        form = FORM_HANDLER.deserialize(io.BytesIO(data), content_type, len(data))
        if _part_without_headers(content_type, data):
            raise unreadable_form("a part has no headers naming its field")
        return _fields(form)
    except falcon.MultipartParseError as e:  # over a limit above, or no multipart structure
        raise unreadable_form(e.description) from None
    except falcon.HTTPInvalidHeader:  # no boundary, or one of more than 70 characters
        raise unreadable_form("its Content-Type names no usable boundary") from None
    except UnicodeDecodeError:  # a part header that is not UTF-8 (its Content-Type: ASCII)
        raise unreadable_form("a part's headers are not UTF-8") from None


def _part_without_headers(content_type: str, data: bytes) -> bool:
    """Whether a delimiter line is followed by a blank line. RFC 7578 (section 4.2) has every
    part name its field in a header; falcon's parser would read such a part's body, and the
    next part's delimiter and headers, as its headers."""
    boundary = falcon.parse_header(content_type)[1]["boundary"].rstrip()
    return b"--" + boundary.encode() + b"\r\n\r\n" in data


ANSWER_PREFIX = "answers."  # the form's name of a screening question's answer: answers.{id}


def _fields(form: MultipartForm) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for part in form:
        name = part.name
        if name is None:
            continue
        raw = part.get_data()
        filename = part.filename
        if filename is not None or name == "resume":
            if raw or filename:
                fields[name] = Upload(filename, raw) if raw else None
            continue
        value = text(name, charset(part.content_type), raw)
        if name.startswith(ANSWER_PREFIX):  # a screening question's (C21): `answers` as JSON's
            answers = fields.setdefault("answers", {})
            asked = name.removeprefix(ANSWER_PREFIX)
            if asked in answers:  # a multiChoice question's boxes, one part each
                kept = answers[asked]
                answers[asked] = [*kept, value] if isinstance(kept, list) else [kept, value]
            else:
                answers[asked] = value
            continue
        fields[name] = value
    return fields


def charset(content_type: str) -> str:
    """The charset a part's Content-Type names, RFC 2231's `charset*=` too; UTF-8 by default."""
    _, params = falcon.parse_header(content_type)
    if "charset*" in params:  # charset'language'name, the name percent-encoded
        return unquote(params["charset*"].split("'", 2)[-1], "latin-1")
    return params.get("charset") or "utf-8"


def text(name: str, charset: str, raw: bytes) -> str:
    """A text part, decoded strictly in the charset it names (UTF-8 when it names none): an
    unknown charset, a codec that is no text encoding (rot13, base64), bytes that are not in
    the charset, or text no UTF-8 can hold (a lone surrogate, from UTF-7) are 400 (C1, C8)."""
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


def unreadable_form(reason: str | None) -> Problem:
    detail = "The multipart/form-data body could not be read"
    return malformed(
        f"{detail}{f': {reason}' if reason else ''}. A form has at most {MAX_PARTS} parts, "
        f"each with headers naming its field, of at most {MAX_PART_HEADERS} bytes."
    )
