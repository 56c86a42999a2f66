"""What the application tests share: an applicant's bodies (JSON and multipart), posting one,
reading the answer, and an app with no rate limit that records what it enqueues (C8)."""

from __future__ import annotations

import base64
import io
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.core.settings import Settings
from tests.conftest import Api
from tests.factories import create_job

API = "/api/v1.1"
MiB = 1024 * 1024
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
UTC_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")  # C10: milliseconds
MAIL_FROM = "Jobpost <jobpost@jobs.example>"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def applicant(**overrides: Any) -> dict[str, Any]:
    """A valid JSON application, every member present (C8)."""
    body: dict[str, Any] = {
        "name": "Élodie Côté",
        "email": "elodie@example.org",
        "phone": "+1 (514) 555-0199",
        "coverLetter": "Bonjour,\nI bake bread.",
        "resume": {"filename": "Élodie CV.pdf", "content": b64(PDF)},
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


def multipart(
    fields: dict[str, str],
    files: dict[str, tuple[str, str, bytes]] | None = None,
    boundary: str = "----jobpost-test-boundary-7MA4YWxkTrZu0gW",
) -> tuple[str, bytes]:
    """A multipart/form-data body as (content type, bytes); files: name → (filename, type, data)."""
    out = io.BytesIO()
    for name, value in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        out.write(value.encode("utf-8") + b"\r\n")
    for name, (filename, ctype, data) in (files or {}).items():
        out.write(
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="{name}"; filename="{filename}"\r\nContent-Type: {ctype}\r\n\r\n'.encode()
        )
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", out.getvalue()


Enqueued = list[tuple[int, str | None]]


@pytest.fixture
def enqueued() -> Enqueued:
    """What the app enqueued after commit: (application id, request id)."""
    return []


@pytest.fixture
def app(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, enqueued: Enqueued
) -> WsgiApp:
    """No rate limit here (tests/api/test_rate_limit.py has it); enqueues are recorded."""
    parts = Collaborators(
        enqueue=lambda app_id, rid: enqueued.append((app_id, rid)), limiter=ratelimit.Unlimited()
    )
    return create_app(settings, sessions, parts, today=clock)


@pytest.fixture
def job(api: Api, employer: Any) -> dict[str, Any]:
    """An active Email-routed job with a referenceId."""
    return create_job(api, employer, status="active", referenceId="BAKE-7")


def apply(api: Api, job_id: int, document: Any = None, **kw: Any) -> Any:
    """POST an application: `document` as JSON (a valid one by default), or raw `body=`."""
    if "body" not in kw:
        kw["json"] = applicant() if document is None else document
    return api.post(f"{API}/jobs/{job_id}/applications", **kw)


def received(result: Any) -> int:
    """The id of a 202 {"id", "status": "received"} (C8)."""
    assert result.status_code == 202, result.text
    assert result.headers["content-type"] == "application/json"
    assert set(result.json) == {"id", "status"} and result.json["status"] == "received"
    app_id: int = result.json["id"]
    assert isinstance(app_id, int) and app_id >= 1
    return app_id


def listed(api: Api, account: Any, path: str = f"{API}/applications", **params: Any) -> Any:
    result = api.get(path, key=account.key, params=params or None)
    assert result.status_code == 200, result.text
    return result.json


def close_to_now(stamp: str) -> None:
    assert UTC_Z.fullmatch(stamp), stamp
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - moment) < timedelta(minutes=1)
