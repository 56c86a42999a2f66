"""Application bodies: JSON, or multipart/form-data with a file part `resume` (C8)."""

from __future__ import annotations

from email import policy
from email.parser import BytesParser
from typing import Any

import falcon

from api.body import MiB, media_type, parse_json, read_bytes
from api.errors import Problem
from models.applications import Upload

APPLICATION_BODY_LIMIT = 10 * MiB
FORM_TYPES = ("application/json", "multipart/form-data")


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
    message = BytesParser(policy=policy.HTTP).parsebytes(head + data)
    if not message.is_multipart() or message.defects:
        raise Problem(400, "malformed_json", "The multipart/form-data body could not be read.")
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
        fields[name] = raw.decode(part.get_content_charset() or "utf-8", "replace")
    return fields
