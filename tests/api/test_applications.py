"""C8 Applications over the API: the public submission, the after-commit enqueue, the
employer's view, and the delivery of the copy (every error in the C1 shape)."""

from __future__ import annotations

import base64
import dataclasses
import io
import logging
import queue
import re
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from celery import Celery
from sqlalchemy import text, update
from sqlalchemy.orm import Session, sessionmaker

from api import forms, ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.applications import outbox
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import Application, OutboxEntry
from tests.conftest import Api, SmtpSink
from tests.factories import create_job, entries, problem
from tests.resume_files import DOC_BYTES, DOC_MACROS_BYTES, DOCM_BYTES, DOCX_BYTES, XLS_BYTES
from workers import delivery, enqueue
from workers.app import make_celery

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


# --- Submission and the employer's view (C8) -------------------------------------------------


def test_json_application_is_stored_and_shown_to_its_employer(
    api: Api, employer: Any, job: dict[str, Any], enqueued: Enqueued
) -> None:
    # C8: 202 {"id", "status": "received"}; the employer reads every member.
    app_id = received(apply(api, job["id"], headers={"X-Request-ID": "req-json.1"}))
    item = api.get(f"{API}/applications/{app_id}", key=employer.key)
    assert item.status_code == 200
    shown = item.json
    close_to_now(shown.pop("receivedAt"))
    assert shown == {
        "id": app_id,
        "jobId": job["id"],
        "name": "Élodie Côté",
        "email": "elodie@example.org",
        "phone": "+1 (514) 555-0199",
        "coverLetter": "Bonjour,\nI bake bread.",
        # C8: a sanitised filename with the detected type's extension.
        "resume": {"filename": "Elodie CV.pdf", "size": len(PDF), "contentType": "application/pdf"},
        "status": "pending",
        "attempts": 0,
        "sentAt": None,
        "lastError": None,
    }
    assert listed(api, employer)["data"] == [item.json]
    assert listed(api, employer, f"{API}/jobs/{job['id']}/applications")["data"] == [item.json]
    # C9: the request id is carried into the task enqueued after commit.
    assert enqueued == [(app_id, "req-json.1")]


def test_resume_bytes_come_back_exactly_with_the_detected_type(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    app_id = received(apply(api, job["id"]))
    result = api.get(f"{API}/applications/{app_id}/resume", key=employer.key)
    assert result.status_code == 200
    assert result.content == PDF
    assert result.headers["content-type"] == "application/pdf"
    assert "Elodie CV.pdf" in result.headers["content-disposition"]
    assert result.headers["x-content-type-options"] == "nosniff"


def test_a_text_resume_is_served_as_utf_8(api: Api, employer: Any, job: dict[str, Any]) -> None:
    # C8: TXT is UTF-8 only; text/plain without a charset would be read as US-ASCII.
    data = "Élodie Côté — Boulangère\n".encode()
    resume = {"filename": "cv.txt", "content": b64(data)}
    app_id = received(apply(api, job["id"], applicant(resume=resume)))
    result = api.get(f"{API}/applications/{app_id}/resume", key=employer.key)
    assert result.content == data
    assert result.headers["content-type"] == "text/plain; charset=utf-8"
    assert api.get(f"{API}/applications/{app_id}", key=employer.key).json["resume"] == {
        "filename": "cv.txt",
        "size": len(data),
        "contentType": "text/plain",
    }


@pytest.mark.parametrize("view", ["", "/resume", "list", "job list"])
def test_no_cache_may_keep_the_employers_view(
    api: Api, employer: Any, job: dict[str, Any], view: str
) -> None:
    # C8: personal data, behind an API-Key header that caches do not treat as Authorization.
    app_id = received(apply(api, job["id"]))
    path = {
        "list": f"{API}/applications",
        "job list": f"{API}/jobs/{job['id']}/applications",
    }.get(view, f"{API}/applications/{app_id}{view}")
    for method in ("GET", "HEAD"):
        result = api.request(method, path, key=employer.key)
        assert result.status_code == 200
        assert result.headers["cache-control"] == "no-store"


def test_multipart_application_with_a_file_part(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    # C8: multipart/form-data, the résumé a file part named `resume`, its type by content.
    data = DOCX_BYTES
    ctype, body = multipart(
        {
            "name": "Zoë Brontë",
            "email": "ann@example.org",
            "phone": "416 555 0100",
            "coverLetter": "Hire me.",
        },
        {"resume": ("Élodie CV.docx", "application/octet-stream", data)},
    )
    app_id = received(apply(api, job["id"], body=body, content_type=ctype))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["name"] == "Zoë Brontë" and shown["email"] == "ann@example.org"
    assert shown["phone"] == "416 555 0100" and shown["coverLetter"] == "Hire me."
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert shown["resume"] == {
        "filename": "Elodie CV.docx",
        "size": len(data),
        "contentType": docx_type,
    }
    resume = api.get(f"{API}/applications/{app_id}/resume", key=employer.key)
    assert resume.content == data and resume.headers["content-type"] == docx_type


def test_a_word_97_document_is_served_as_msword(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    # C8: DOC is judged by its WordDocument stream, whatever the extension.
    resume = {"filename": "cv.bin", "content": b64(DOC_BYTES)}
    app_id = received(apply(api, job["id"], applicant(resume=resume)))
    result = api.get(f"{API}/applications/{app_id}/resume", key=employer.key)
    assert result.content == DOC_BYTES
    assert result.headers["content-type"] == "application/msword"
    assert "cv.doc" in result.headers["content-disposition"]


def test_multipart_without_a_file_has_no_resume(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    ctype, body = multipart(
        {"name": "Ann Baker", "email": "ann@example.org"},
        {"resume": ("", "application/octet-stream", b"")},
    )
    app_id = received(apply(api, job["id"], body=body, content_type=ctype))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["resume"] is None and shown["phone"] is None and shown["coverLetter"] is None
    # No résumé: its bytes are a 404 (C1 not_found).
    problem(api.get(f"{API}/applications/{app_id}/resume", key=employer.key), 404, "not_found")


def test_a_multipart_resume_of_5_mib_comes_back_exactly(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    # Line breaks of every kind, and dashes that start no delimiter, are the résumé's own.
    data = (PDF + b"\r\n--\r--\n--B\r\n\n\r\r\n" * 1000)[: 5 * MiB]
    data += b"0" * (5 * MiB - len(data))
    ctype, body = multipart(
        {"name": "Ann", "email": "ann@example.org"}, {"resume": ("cv.pdf", "application/pdf", data)}
    )
    app_id = received(apply(api, job["id"], body=body, content_type=ctype))
    resume = api.get(f"{API}/applications/{app_id}/resume", key=employer.key)
    assert resume.content == data


def test_a_5_mib_resume_is_read_in_one_piece() -> None:
    """C8: a sync worker reads the form without copying the résumé line by line, as the stdlib
    email parser did (about ten copies at once); falcon's parser holds one."""
    resume = (b"BT /F1 12 Tf 72 712 Td (Line of a CV) Tj ET\r\n" * 200_000)[: 5 * MiB]
    document = {"name": "Ann", "email": "ann@example.org"}
    ctype, body = multipart(document, {"resume": ("cv.pdf", "application/pdf", resume)})
    tracemalloc.start()
    try:
        fields = forms.parse_multipart(ctype, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fields["resume"].data == resume
    assert peak < 2 * len(resume)


def test_minimal_json_application(api: Api, employer: Any, job: dict[str, Any]) -> None:
    body = {"name": "  Bo  ", "email": "bo@example.org", "phone": "", "resume": None}
    app_id = received(apply(api, job["id"], body))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["name"], shown["phone"], shown["coverLetter"], shown["resume"]) == (
        "Bo",
        None,
        None,
        None,
    )


def test_a_text_resume_of_exactly_5_mib_is_accepted(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    data = b"a" * (5 * MiB)
    resume = {"filename": "cv.txt", "content": b64(data)}
    app_id = received(apply(api, job["id"], applicant(resume=resume)))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["resume"] == {"filename": "cv.txt", "size": 5 * MiB, "contentType": "text/plain"}


# --- The after-commit enqueue (C8 Nothing is lost) -------------------------------------------


@pytest.fixture
def memory_celery(settings: Settings) -> Iterator[Celery]:
    """A real Celery app on kombu's in-memory transport, its `email` queue empty."""
    celery = make_celery(dataclasses.replace(settings, broker_url="memory://"))
    with celery.connection_for_write() as conn:
        conn.SimpleQueue("email").clear()
    yield celery
    with celery.connection_for_write() as conn:
        conn.SimpleQueue("email").clear()


def celery_app(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    celery: Celery,
    results: list[bool] | None = None,
) -> Api:
    def send(app_id: int, request_id: str | None) -> None:
        sent = enqueue.deliver(celery, app_id, request_id)
        if results is not None:
            results.append(sent)

    parts = Collaborators(enqueue=send, limiter=ratelimit.Unlimited())
    return Api(create_app(settings, sessions, parts, today=clock))


def email_messages(celery: Celery) -> list[Any]:
    """Every message waiting on the `email` queue (taken off it)."""
    found = []
    with celery.connection_for_write() as conn:
        q = conn.SimpleQueue("email")
        try:
            while True:
                message = q.get(block=False)
                message.ack()
                found.append(message)
        except queue.Empty:
            pass
        finally:
            q.close()
    return found


def test_the_deliver_task_is_enqueued_after_commit_with_the_request_id(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    employer: Any,
    memory_celery: Celery,
) -> None:
    api = celery_app(settings, sessions, clock, memory_celery)
    job = create_job(api, employer, status="active")
    app_id = received(apply(api, job["id"], headers={"X-Request-ID": "abc-123_x.y"}))
    [message] = email_messages(memory_celery)
    assert message.headers["task"] == "jobpost.deliver"
    args, kwargs, _ = message.payload
    assert args == [app_id]
    assert kwargs == {"request_id": "abc-123_x.y"}


def test_a_failed_request_enqueues_nothing(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    employer: Any,
    memory_celery: Celery,
) -> None:
    api = celery_app(settings, sessions, clock, memory_celery)
    job = create_job(api, employer, status="active")
    entries(apply(api, job["id"], applicant(email="nope")))
    assert email_messages(memory_celery) == []
    assert listed(api, employer)["data"] == []


def test_a_broker_that_is_down_does_not_undo_the_202(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    # C8: the 202 stands; the enqueue holds the request about a second at most; the outbox
    # entry stays pending for the sweeper.
    down = make_celery(dataclasses.replace(settings, broker_url="redis://127.0.0.1:1/0"))
    results: list[bool] = []
    api = celery_app(settings, sessions, clock, down, results)
    job = create_job(api, employer, status="active")
    started = time.monotonic()
    app_id = received(apply(api, job["id"]))
    assert time.monotonic() - started < 5
    assert results == [False]
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["sentAt"]) == ("pending", 0, None)
    with sessions() as s:
        entry = s.get_one(OutboxEntry, app_id)
        assert entry.status == "pending" and entry.next_attempt_at <= datetime.now(UTC)


def test_a_broker_that_never_answers_holds_the_enqueue_about_a_second(settings: Settings) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        silent_broker = dataclasses.replace(settings, broker_url=f"redis://127.0.0.1:{port}/0")
        hung = make_celery(silent_broker, publisher=True)
        started = time.monotonic()
        assert enqueue.deliver(hung, 1, "req-1") is False
        assert time.monotonic() - started < 2.5


# --- Bad input (C8, C1) ----------------------------------------------------------------------

BAD_INPUT = {
    "missing name": ({"name": ...}, [("name", "required")]),
    "blank name": ({"name": "   "}, [("name", "required")]),
    "name too long": ({"name": "x" * 101}, [("name", "too_long")]),
    "name not a string": ({"name": 7}, [("name", "invalid_type")]),
    "missing email": ({"email": ...}, [("email", "required")]),
    "bad email": ({"email": "elodie.example.org"}, [("email", "invalid_format")]),
    "email holding an encoded word": (  # RFC 5322 allows it; mail software would decode it
        {"email": "=?utf-8?q?=0D=0Ax?=@example.org"},
        [("email", "invalid_format")],
    ),
    "bad phone": ({"phone": "call me maybe"}, [("phone", "invalid_format")]),
    "phone too long": ({"phone": "1" * 31}, [("phone", "too_long")]),
    "phone without a digit": ({"phone": "+ (-) ."}, [("phone", "invalid_format")]),
    "cover letter too long": ({"coverLetter": "x" * 10_001}, [("coverLetter", "too_long")]),
    "resume over 5 MiB": (
        {"resume": {"filename": "cv.txt", "content": b64(b"a" * (5 * MiB + 1))}},
        [("resume", "file_too_large")],
    ),
    "PNG named cv.pdf": (
        {"resume": {"filename": "cv.pdf", "content": b64(PNG)}},
        [("resume", "file_type_not_allowed")],
    ),
    "bad base64": (
        {"resume": {"filename": "cv.pdf", "content": "not base64 at all!"}},
        [("resume.content", "invalid_format")],
    ),
    "resume without content": (
        {"resume": {"filename": "cv.pdf"}},
        [("resume.content", "required")],
    ),
    "resume not an object": ({"resume": "cv.pdf"}, [("resume", "invalid_type")]),
    "resume filename not a string": (
        {"resume": {"filename": 7, "content": b64(PDF)}},
        [("resume.filename", "invalid_type")],
    ),
    "resume filename too long": (
        {"resume": {"filename": "c" * 252 + ".pdf", "content": b64(PDF)}},
        [("resume.filename", "too_long")],
    ),
    "several at once": (
        {
            "name": ...,
            "email": "x@",
            "phone": "abc",
            "coverLetter": "x" * 10_001,
            "resume": {"filename": "cv.pdf", "content": b64(PNG)},
        },
        [
            ("name", "required"),
            ("email", "invalid_format"),
            ("phone", "invalid_format"),
            ("coverLetter", "too_long"),
            ("resume", "file_type_not_allowed"),
        ],
    ),
}


def test_values_at_the_length_limits_are_accepted(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    """C8: name 1 to 100, an address of 254 (the longest a mailbox has), a phone of 30 and a
    cover letter of 10,000 characters: the limits themselves are taken as sent."""
    email = "e" * 64 + "@" + ".".join(["d" * 61] * 3) + ".org"
    assert len(email) == 254
    letter = "x" * 10_000
    phone = "+1 (514) 555-0199 " + "1" * 12
    assert len(phone) == 30
    body = applicant(name="N" * 100, email=email, coverLetter=letter, phone=phone)
    app_id = received(apply(api, job["id"], body))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["name"], shown["email"]) == ("N" * 100, email)
    assert (shown["coverLetter"], shown["phone"]) == (letter, phone)
    received(apply(api, job["id"], applicant(name="N")))


def test_a_json_resume_filename_of_255_characters_is_accepted(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    """C8: the JSON résumé's filename may be 255 characters (256 is too_long, above)."""
    resume = {"filename": "c" * 251 + ".pdf", "content": b64(PDF)}
    app_id = received(apply(api, job["id"], applicant(resume=resume)))
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["resume"]["filename"].endswith(".pdf")
    assert shown["resume"]["contentType"] == "application/pdf"


@pytest.mark.parametrize("case", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_422_listing_every_broken_rule(
    api: Api, employer: Any, job: dict[str, Any], enqueued: Enqueued, case: Any
) -> None:
    overrides, expected = case
    result = apply(api, job["id"], applicant(**overrides))
    assert entries(result) == expected
    assert result.json["detail"] == (
        f"The application has {len(expected)} invalid field{'s' if len(expected) > 1 else ''}."
    )
    # Nothing is stored, nothing enqueued.
    assert listed(api, employer)["data"] == [] and enqueued == []


MULTIPART_FILES = {
    "PNG named cv.pdf": (("cv.pdf", "application/pdf", PNG), "file_type_not_allowed"),
    "over 5 MiB": (("cv.txt", "text/plain", b"a" * (5 * MiB + 1)), "file_too_large"),
    "Excel workbook named cv.doc": (
        ("cv.doc", "application/msword", XLS_BYTES),
        "file_type_not_allowed",
    ),
    "DOCM named cv.docx": (
        ("cv.docx", "application/octet-stream", DOCM_BYTES),
        "file_type_not_allowed",
    ),
    "Word 97 with macros named cv.doc": (
        ("cv.doc", "application/msword", DOC_MACROS_BYTES),
        "file_type_not_allowed",
    ),
}


@pytest.mark.parametrize("case", MULTIPART_FILES.values(), ids=MULTIPART_FILES.keys())
def test_bad_multipart_resume_is_422(api: Api, job: dict[str, Any], case: Any) -> None:
    upload, code = case
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, {"resume": upload})
    assert entries(apply(api, job["id"], body=body, content_type=ctype)) == [("resume", code)]


def test_url_routed_job_is_409_naming_the_url(api: Api, employer: Any) -> None:
    url = "https://maple.test/careers/baker"
    job = create_job(
        api,
        employer,
        status="active",
        applicantRoutingType={"id": 2},
        applicationUrl=url,
        applicationEmail=...,
    )
    body = problem(apply(api, job["id"]), 409, "apply_via_url")
    assert url in body["detail"]


@pytest.mark.parametrize("status", ["draft", "archived"])
def test_a_job_not_active_is_404(api: Api, employer: Any, status: str) -> None:
    job = create_job(api, employer, status=status)
    problem(apply(api, job["id"]), 404, "not_found")


@pytest.mark.parametrize("job_id", ["999999", "2147483648", "abc"])
def test_an_unknown_job_is_404(api: Api, job_id: str) -> None:
    problem(api.post(f"{API}/jobs/{job_id}/applications", json=applicant()), 404, "not_found")


def test_a_deleted_job_is_404(api: Api, employer: Any, job: dict[str, Any]) -> None:
    assert api.delete(f"{API}/jobs/{job['id']}", key=employer.key).status_code == 204
    problem(apply(api, job["id"]), 404, "not_found")


def test_a_body_over_10_mib_is_413(api: Api, job: dict[str, Any]) -> None:
    body = b'{"name": "' + b"x" * (10 * MiB) + b'"}'
    result = apply(api, job["id"], body=body, content_type="application/json")
    problem(result, 413, "payload_too_large")


def test_413_outranks_the_other_errors(api: Api) -> None:
    # C1 order: 413 before 415 and 404.
    result = api.post(
        f"{API}/jobs/999999/applications", body=b"x" * (10 * MiB + 1), content_type="text/plain"
    )
    problem(result, 413, "payload_too_large")


def test_text_plain_is_415(api: Api, job: dict[str, Any]) -> None:
    result = apply(api, job["id"], body="name=Ann", content_type="text/plain")
    problem(result, 415, "unsupported_media_type")


def test_json_with_a_charset_is_accepted(api: Api, job: dict[str, Any]) -> None:
    body = b'{"name": "Ann", "email": "ann@example.org"}'
    received(apply(api, job["id"], body=body, content_type="application/json; charset=utf-8"))


@pytest.mark.parametrize("body", [b'{"name": "Ann",', b"[1, 2]", b"\xff\xfe", b""])
def test_malformed_json_is_400(api: Api, job: dict[str, Any], body: bytes) -> None:
    result = apply(api, job["id"], body=body, content_type="application/json")
    problem(result, 400, "malformed_json")


def test_malformed_multipart_is_400(api: Api, job: dict[str, Any]) -> None:
    result = apply(api, job["id"], body=b"no parts here", content_type="multipart/form-data")
    problem(result, 400, "malformed_json")


def many_parts(count: int) -> tuple[str, bytes]:
    """A valid name and email, after empty parts of another field: `count` parts in all."""
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    return ctype, b"--B\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n" * (count - 2) + body


def test_a_body_of_200_000_parts_is_400(api: Api, job: dict[str, Any]) -> None:
    # C1/C8: the form holds a handful of fields; the parser stops at the part over the count.
    ctype, body = many_parts(200_000)
    result = apply(api, job["id"], body=body, content_type=ctype)
    body_json = problem(result, 400, "malformed_json")
    assert f"at most {forms.MAX_PARTS} parts" in body_json["detail"]


def test_a_body_of_as_many_parts_as_allowed_is_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    ctype, body = many_parts(forms.MAX_PARTS)
    received(apply(api, job["id"], body=body, content_type=ctype))
    ctype, body = many_parts(forms.MAX_PARTS + 1)
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert [a["name"] for a in listed(api, employer)["data"]] == ["Ann"]


@pytest.mark.parametrize("value", [b"", b"Ann"], ids=["empty", "Ann"])
def test_a_part_without_headers_is_400(
    api: Api, employer: Any, job: dict[str, Any], value: bytes
) -> None:
    # RFC 7578 section 4.2: every part names its field in a header. Read as falcon reads it,
    # such a part would take the next part's headers for its own (C1, C8).
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    body = b"--B\r\n\r\n" + value + b"\r\n" + body
    detail = problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert "a part has no headers" in detail["detail"]
    assert listed(api, employer)["data"] == []


def test_a_part_that_names_no_field_is_not_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    ctype, body = multipart({"name": "Ann", "email": "ann@example.org"}, boundary="B")
    nameless = b"--B\r\nContent-Disposition: form-data\r\n\r\nBo\r\n"
    received(apply(api, job["id"], body=nameless + body, content_type=ctype))
    assert [a["name"] for a in listed(api, employer)["data"]] == ["Ann"]


@pytest.mark.parametrize(
    "disposition",
    [
        b'form-data; name="name"' + b"; x=y" * 400_000,  # 2 MB of parameters
        b'form-data; name="name" ' + b"(" * 3000 + b")" * 3000,  # comments 3,000 deep
    ],
    ids=["parameters", "nested-comments"],
)
def test_a_part_header_longer_than_a_form_sends_is_400(
    api: Api, employer: Any, job: dict[str, Any], disposition: bytes
) -> None:
    """C1/C8: the email parser this service once used read such a header slowly enough to hold a
    worker past gunicorn's timeout (docs/benchmarks.md) or gave up in a RecursionError (a 500);
    nothing is stored."""
    ctype, body = with_name_part(None, b"Ann", disposition)
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert listed(api, employer)["data"] == []


def test_part_headers_up_to_the_limit_are_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    filename = "Élodie Côté — curriculum vitæ, version française, novembre 2026 " * 2 + ".pdf"
    document = {"name": "Ann", "email": "ann@example.org"}
    ctype, body = multipart(document, {"resume": (filename, "application/pdf", PDF)})
    received(apply(api, job["id"], body=body, content_type=ctype))
    [shown] = listed(api, employer)["data"]
    assert shown["resume"]["filename"].startswith("Elodie Cote")  # sanitised (C8)


def test_the_longest_part_header_a_browser_sends_is_read(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    # A filename of 255 four-byte characters (the most a file system names), as a type
    # longer than any a browser names for a résumé.
    filename = "𝓒" * 251 + ".pdf"
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    document = {"name": "Ann", "email": "ann@example.org"}
    ctype, body = multipart(document, {"resume": (filename, docx * 2, PDF)})
    received(apply(api, job["id"], body=body, content_type=ctype))
    [shown] = listed(api, employer)["data"]
    assert shown["resume"]["contentType"] == "application/pdf"


def test_part_headers_of_the_limit_are_read_and_a_byte_more_is_400(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    def padded(size: int) -> bytes:
        """A Content-Disposition making the part's headers `size` bytes."""
        head = b'form-data; name="name"; x=""'
        return head[:-1] + b"a" * (size - len(b"Content-Disposition: ") - len(head)) + b'"'

    ctype, body = with_name_part(None, b"Ann", padded(forms.MAX_PART_HEADERS))
    received(apply(api, job["id"], body=body, content_type=ctype))
    ctype, body = with_name_part(None, b"Ann", padded(forms.MAX_PART_HEADERS + 1))
    problem(apply(api, job["id"], body=body, content_type=ctype), 400, "malformed_json")
    assert len(listed(api, employer)["data"]) == 1


def with_name_part(
    content_type: str | None, value: bytes, disposition: bytes = b'form-data; name="name"'
) -> tuple[str, bytes]:
    """A multipart body whose `name` part is `value`, with its own Content-Type if given."""
    ctype, body = multipart({"email": "ann@example.org"}, boundary="B")
    head = b"--B\r\nContent-Disposition: " + disposition + b"\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n".encode()
    return ctype, head + b"\r\n" + value + b"\r\n" + body


NOT_TEXT = {
    "unknown charset": ("text/plain; charset=x-bogus", b"Ann"),
    "unknown charset, RFC 2231": ("text/plain; charset*=utf-8''x-bogus", b"Ann"),
    "a NUL in the charset": ("text/plain; charset*=utf-8''utf%008", b"Ann"),
    "rot13": ("text/plain; charset=rot13", b"Ann"),
    "base64": ("text/plain; charset=base64", b"QW5u"),
    "hex": ("text/plain; charset=hex", b"416e6e"),
    "bytes idna refuses": ("text/plain; charset=idna", b"Ad\xff\xfea"),
    "not UTF-8, no charset": (None, b"Ad\xff\xfea"),
    "not UTF-8, charset utf-8": ("text/plain; charset=utf-8", b"Ad\xff\xfea"),
    "overlong UTF-8": (None, b"A\xc0\x80"),
    "a lone surrogate in UTF-7": ("text/plain; charset=utf-7", b"A+2AA-"),
}


@pytest.mark.parametrize("case", NOT_TEXT.values(), ids=NOT_TEXT.keys())
def test_a_field_that_is_not_text_in_its_charset_is_400_naming_it(
    api: Api, employer: Any, job: dict[str, Any], case: tuple[str | None, bytes]
) -> None:
    # C1/C8: never a 500 (LookupError, UnicodeError) nor U+FFFD stored for the bytes sent.
    ctype, body = with_name_part(*case)
    result = apply(api, job["id"], body=body, content_type=ctype)
    assert "'name'" in problem(result, 400, "malformed_json")["detail"]
    assert listed(api, employer)["data"] == []


def test_a_field_is_read_in_the_charset_it_names_utf_8_by_default(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    for content_type, value in [
        (None, "Élodie\ufffd".encode()),
        ("text/plain; charset=ISO-8859-1", "Élodie".encode("latin-1")),
        ("text/plain; charset=idna", b"xn--lodie-9ra"),
    ]:
        ctype, body = with_name_part(content_type, value)
        received(apply(api, job["id"], body=body, content_type=ctype))
    names = [a["name"] for a in listed(api, employer)["data"]]
    assert names == ["élodie", "Élodie", "Élodie\ufffd"]


def test_400_outranks_404(api: Api) -> None:
    result = api.post(f"{API}/jobs/999999/applications", body=b"{", content_type="application/json")
    problem(result, 400, "malformed_json")


def test_404_outranks_422(api: Api) -> None:
    result = api.post(f"{API}/jobs/999999/applications", json={"name": ""})
    problem(result, 404, "not_found")


def test_the_honeypot_is_told_it_succeeded_and_nothing_is_kept(
    api: Api, employer: Any, job: dict[str, Any], enqueued: Enqueued
) -> None:
    # C8: `website` filled: the normal success, nothing stored or sent.
    received(apply(api, job["id"], applicant(website="http://spam.example")))
    ctype, body = multipart({"name": "Bot", "email": "bot@example.org", "website": "x"})
    received(apply(api, job["id"], body=body, content_type=ctype))
    assert listed(api, employer)["data"] == []
    assert enqueued == []


def test_an_empty_honeypot_is_no_honeypot(api: Api, employer: Any, job: dict[str, Any]) -> None:
    app_id = received(apply(api, job["id"], applicant(website="")))
    assert [a["id"] for a in listed(api, employer)["data"]] == [app_id]


# --- Scoping, filters and paging (C8, C6) ----------------------------------------------------


def test_another_employers_application_is_404(
    api: Api, employer: Any, make_employer: Any, job: dict[str, Any]
) -> None:
    app_id = received(apply(api, job["id"]))
    other = make_employer("Birch Ltd")
    problem(api.get(f"{API}/applications/{app_id}", key=other.key), 404, "not_found")
    problem(api.get(f"{API}/applications/{app_id}/resume", key=other.key), 404, "not_found")
    problem(api.get(f"{API}/jobs/{job['id']}/applications", key=other.key), 404, "not_found")
    assert listed(api, other)["data"] == []
    assert listed(api, other, jobId=job["id"])["data"] == []


@pytest.mark.parametrize(
    "path", ["/applications/1", "/applications/1/resume", "/applications", "/jobs/1/applications"]
)
def test_the_employer_view_needs_a_key(api: Api, path: str) -> None:
    problem(api.get(API + path), 401, "unauthorized")


@pytest.mark.parametrize("raw", ["0", "abc", "99999999999"])
def test_an_unknown_application_is_404(api: Api, employer: Any, raw: str) -> None:
    problem(api.get(f"{API}/applications/{raw}", key=employer.key), 404, "not_found")


def test_the_applications_of_an_unknown_job_are_404(api: Api, employer: Any) -> None:
    problem(api.get(f"{API}/jobs/999999/applications", key=employer.key), 404, "not_found")


def test_an_archived_jobs_applications_are_still_listed(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    app_id = received(apply(api, job["id"]))
    archived = api.put(f"{API}/jobs/{job['id']}", json={"status": "archived"}, key=employer.key)
    assert archived.status_code == 200, archived.text
    page = listed(api, employer, f"{API}/jobs/{job['id']}/applications")
    assert [a["id"] for a in page["data"]] == [app_id]


def mark(sessions: sessionmaker[Session], app_id: int, status: str) -> None:
    with sessions() as s:
        s.execute(
            update(OutboxEntry).where(OutboxEntry.application_id == app_id).values(status=status)
        )
        s.commit()


def test_filters_by_job_and_status_newest_first(
    api: Api, employer: Any, job: dict[str, Any], sessions: sessionmaker[Session]
) -> None:
    second = create_job(api, employer, status="active", title="Pastry Chef")
    a1 = received(apply(api, job["id"]))
    a2 = received(apply(api, second["id"]))
    a3 = received(apply(api, job["id"]))
    mark(sessions, a3, "sent")

    def ids(path: str = f"{API}/applications", **params: Any) -> list[int]:
        return [a["id"] for a in listed(api, employer, path, **params)["data"]]

    assert ids() == [a3, a2, a1]
    assert ids(jobId=job["id"]) == [a3, a1]
    assert ids(jobId=second["id"]) == [a2]
    assert ids(status="sent") == [a3]
    assert ids(status="pending") == [a2, a1]
    assert ids(jobId=job["id"], status="pending") == [a1]
    assert ids(status="failed") == []
    assert ids(status="sending") == []  # C8: one of the four delivery states, a filter too
    assert ids(jobId=999999) == []
    assert ids(jobId="") == [a3, a2, a1]  # C1: an empty value means absent
    assert ids(f"{API}/jobs/{job['id']}/applications") == [a3, a1]
    assert ids(f"{API}/jobs/{job['id']}/applications", status="sent") == [a3]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "open"}, "status"),
        ({"status": "Pending"}, "status"),
        ({"jobId": "abc"}, "jobId"),
        ({"jobId": "-1"}, "jobId"),
        ({"jobId": "0"}, "jobId"),
        ({"jobId": "2147483648"}, "jobId"),
        ({"pageSize": "0"}, "pageSize"),
        ({"pageSize": "101"}, "pageSize"),
        ({"page": "abc"}, "page"),
    ],
)
def test_a_malformed_filter_is_400_invalid_query(
    api: Api, employer: Any, params: dict[str, str], field: str
) -> None:
    result = api.get(f"{API}/applications", key=employer.key, params=params)
    assert [f for f, _ in entries(result, 400, "invalid_query")] == [field]


def test_every_malformed_filter_is_listed(api: Api, employer: Any) -> None:
    # C1: `errors` lists every violated rule, naming each parameter.
    result = api.get(
        f"{API}/applications",
        key=employer.key,
        params={"jobId": "abc", "status": "open", "pageSize": "0"},
    )
    assert entries(result, 400, "invalid_query") == [
        ("jobId", "invalid_type"),
        ("status", "out_of_range"),
        ("pageSize", "out_of_range"),
    ]


@pytest.mark.parametrize("name", ["jobId", "status", "page", "pageSize"])
def test_a_filter_that_is_not_utf_8_is_400_invalid_query(
    api: Api, employer: Any, job: dict[str, Any], name: str
) -> None:
    # C1/C6: every paged list, both paths.
    for path in (f"{API}/applications", f"{API}/jobs/{job['id']}/applications"):
        if name == "jobId" and path != f"{API}/applications":
            continue
        result = api.get(path, key=employer.key, query_string=f"{name}=1%FF")
        assert entries(result, 400, "invalid_query") == [(name, "invalid_format")]


def test_a_bad_filter_on_an_unknown_job_is_400_before_404(api: Api, employer: Any) -> None:
    # C1 order: 400 before 404.
    result = api.get(f"{API}/jobs/999999/applications", key=employer.key, params={"status": "open"})
    assert entries(result, 400, "invalid_query") == [("status", "out_of_range")]


def test_the_job_list_rejects_a_bad_status_too(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    result = api.get(
        f"{API}/jobs/{job['id']}/applications", key=employer.key, params={"status": "open"}
    )
    assert entries(result, 400, "invalid_query") == [("status", "out_of_range")]


def query_of(link: str) -> tuple[str, list[tuple[str, str]]]:
    parts = urlsplit(link)
    return parts.path, parse_qsl(parts.query)


def test_paging_links_carry_job_and_status(api: Api, employer: Any, job: dict[str, Any]) -> None:
    # C6 rules for every paged list: supplied filters, then pageSize and page, in that order.
    made = [received(apply(api, job["id"])) for _ in range(3)]
    jid = str(job["id"])
    page = listed(api, employer, jobId=jid, status="pending", pageSize=1, page=2)
    assert [a["id"] for a in page["data"]] == [made[1]]
    assert {k: page["paging"][k] for k in ("total", "page", "pages", "pageSize")} == {
        "total": 3,
        "page": 2,
        "pages": 3,
        "pageSize": 1,
    }
    carried = [("status", "pending"), ("jobId", jid), ("pageSize", "1")]  # C10's order
    assert query_of(page["paging"]["next"]) == (f"{API}/applications", [*carried, ("page", "3")])
    assert query_of(page["paging"]["previous"]) == (
        f"{API}/applications",
        [*carried, ("page", "1")],
    )
    assert page["paging"]["next"].startswith("http://")
    bare = listed(api, employer, pageSize=2)
    assert query_of(bare["paging"]["next"]) == (
        f"{API}/applications",
        [("pageSize", "2"), ("page", "2")],
    )
    path = f"{API}/jobs/{jid}/applications"
    by_job = listed(api, employer, path, status="pending", pageSize=1)
    assert query_of(by_job["paging"]["next"]) == (
        path,
        [("status", "pending"), ("pageSize", "1"), ("page", "2")],
    )
    assert by_job["paging"]["previous"] is None
    past = listed(api, employer, pageSize=2, page=5)
    assert past["data"] == [] and past["paging"]["next"] is None


# --- Deleting the job, and delivering the copy (C8 Delivery) ---------------------------------


@pytest.fixture
def mail_settings(settings: Settings, smtp_sink: SmtpSink) -> Settings:
    return dataclasses.replace(
        settings,
        smtp_host=smtp_sink.host,
        smtp_port=smtp_sink.port,
        smtp_timeout=5,
        mail_from=MAIL_FROM,
    )


Deliver = Callable[[int], str]


@pytest.fixture
def deliver(sessions: sessionmaker[Session], mail_settings: Settings) -> Deliver:
    return lambda app_id: delivery.deliver(sessions, mail_settings, app_id)


def test_a_deleted_jobs_application_stays_and_is_still_delivered(
    api: Api, employer: Any, job: dict[str, Any], smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    app_id = received(apply(api, job["id"]))
    assert api.delete(f"{API}/jobs/{job['id']}", key=employer.key).status_code == 204
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["jobId"] is None  # ON DELETE SET NULL; the snapshot stays (C8)
    assert [a["id"] for a in listed(api, employer)["data"]] == [app_id]
    problem(api.get(f"{API}/jobs/{job['id']}/applications", key=employer.key), 404, "not_found")

    assert deliver(app_id) == "sent"
    [message] = smtp_sink.messages
    assert smtp_sink.envelopes == [("jobpost@jobs.example", ["jobs@maple.test"])]
    assert message["To"] == "jobs@maple.test"
    assert message["Reply-To"].addresses[0].addr_spec == "elodie@example.org"
    assert message["From"].addresses[0].addr_spec == "jobpost@jobs.example"
    assert message["Subject"] == "New application: Senior Baker [BAKE-7]"
    assert message["Message-ID"] == f"<application-{app_id}@jobs.example>"
    text, page = message.get_body(("plain",)), message.get_body(("html",))
    assert text is not None and page is not None
    for part in (text, page):
        content = part.get_content()
        for value in (
            "Élodie Côté",
            "elodie@example.org",
            "+1 (514) 555-0199",
            "I bake bread.",
            "Senior Baker",
            "BAKE-7",
            "Maple Corp",
            "none (job deleted)",
        ):
            assert value in content, value
    [attachment] = list(message.iter_attachments())
    assert attachment.get_payload(decode=True) == PDF
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_filename() == "Elodie CV.pdf"

    after = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (after["status"], after["attempts"], after["lastError"]) == ("sent", 1, None)
    close_to_now(after["sentAt"])
    # C8: a copy marked sent is never sent again.
    assert deliver(app_id) == "skipped"
    assert len(smtp_sink.messages) == 1
    assert listed(api, employer, status="sent")["data"] == [after]


def test_a_subject_without_reference_id_has_no_brackets(
    api: Api, employer: Any, smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(apply(api, job["id"], applicant(resume=None)))
    assert deliver(app_id) == "sent"
    [message] = smtp_sink.messages
    assert message["Subject"] == "New application: Senior Baker"
    assert list(message.iter_attachments()) == []
    plain = message.get_body(("plain",))
    assert plain is not None and f"Job ID: {job['id']}" in plain.get_content()


def test_a_permanent_refusal_fails_for_good(
    api: Api, employer: Any, job: dict[str, Any], smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    app_id = received(apply(api, job["id"]))
    smtp_sink.reply = "550 5.1.1 Mailbox unavailable"
    assert deliver(app_id) == "failed"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["sentAt"]) == ("failed", 1, None)
    assert "550" in shown["lastError"]
    smtp_sink.reply = None
    assert deliver(app_id) == "skipped"
    assert smtp_sink.messages == []
    assert api.get(f"{API}/applications/{app_id}", key=employer.key).json == shown


def test_a_name_holding_encoded_words_is_delivered_as_written_with_no_header_added(
    api: Api, employer: Any, job: dict[str, Any], smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    """C8: Reply-To the applicant and the subject, each one header, whatever the name holds
    (before Python 3.11.10 the email package wrote a decoded line break out raw)."""
    name = "=?utf-8?q?Eve=0D=0ABcc:_x@example.com=0D=0ASubject:_Pay_now?="
    app_id = received(apply(api, job["id"], applicant(name=name, resume=None)))
    assert deliver(app_id) == "sent"
    [message] = smtp_sink.messages
    assert "Bcc" not in message and message.get_all("Subject") == [
        f"New application: {job['title']} [{job['referenceId']}]"
    ]
    [reply_to] = message["Reply-To"].addresses
    assert reply_to.addr_spec == "elodie@example.org"
    assert reply_to.display_name.replace(" ", "") == name


def test_a_copy_that_cannot_be_written_fails_for_good_with_the_reason(
    api: Api,
    employer: Any,
    job: dict[str, Any],
    smtp_sink: SmtpSink,
    deliver: Deliver,
    sessions: sessionmaker[Session],
) -> None:
    """An address refused on intake now (models.core.checks.email) but stored before: no message
    can be made of it, and no retry would change that, so the entry fails at once instead of
    coming back after every lease."""
    app_id = received(apply(api, job["id"]))
    with sessions() as s:
        s.execute(
            update(Application)
            .where(Application.id == app_id)
            .values(application_email="=?utf-8?q?=0D=0Ax?=@maple.test")
        )
        s.commit()
    assert deliver(app_id) == "failed"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"]) == ("failed", 1)
    assert shown["lastError"].startswith("the copy could not be written")
    assert deliver(app_id) == "skipped" and smtp_sink.messages == []


def test_a_transient_refusal_is_retried_later(
    api: Api,
    employer: Any,
    job: dict[str, Any],
    smtp_sink: SmtpSink,
    deliver: Deliver,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
) -> None:
    app_id = received(apply(api, job["id"]))
    smtp_sink.reply = "451 4.3.0 Try again later"
    before = datetime.now(UTC)
    assert deliver(app_id) == "retry"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["sentAt"]) == ("pending", 1, None)
    assert "451" in shown["lastError"]
    base = mail_settings.delivery_retry_base_seconds
    with sessions() as s:
        due = s.get_one(OutboxEntry, app_id).next_attempt_at
    # The first retry waits base * [0.5, 1] (exponential backoff with jitter).
    assert before + timedelta(seconds=base * 0.5) <= due
    assert due <= datetime.now(UTC) + timedelta(seconds=base)
    # Not due yet: a re-delivered task does nothing.
    smtp_sink.reply = None
    assert deliver(app_id) == "skipped"
    assert smtp_sink.messages == []
    assert api.get(f"{API}/applications/{app_id}", key=employer.key).json["attempts"] == 1
    # Once due, the next attempt sends it.
    with sessions() as s:
        s.execute(
            update(OutboxEntry)
            .where(OutboxEntry.application_id == app_id)
            .values(next_attempt_at=datetime.now(UTC) - timedelta(seconds=1))
        )
        s.commit()
    assert deliver(app_id) == "sent"
    assert len(smtp_sink.messages) == 1
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["lastError"]) == ("sent", 2, None)


def received_ago(
    sessions: sessionmaker[Session], app_id: int, age: timedelta, attempts: int
) -> None:
    """Make the application `age` old, its copy due now after `attempts` failed attempts."""
    now = datetime.now(UTC)
    with sessions() as s:
        s.execute(update(Application).where(Application.id == app_id).values(received_at=now - age))
        s.execute(
            update(OutboxEntry)
            .where(OutboxEntry.application_id == app_id)
            .values(attempts=attempts, next_attempt_at=now - timedelta(seconds=1))
        )
        s.commit()


def test_transient_failures_are_retried_until_the_retry_hours_are_over(
    api: Api,
    employer: Any,
    job: dict[str, Any],
    smtp_sink: SmtpSink,
    deliver: Deliver,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
) -> None:
    """DELIVERY_RETRY_HOURS (24) after the application arrived, not before: 21 hours in, with
    a backoff of 3 to 6 hours by now, the copy is tried once more at the 24th hour at the
    latest; once those hours are over, a transient failure fails it for good (C8)."""
    app_id = received(apply(api, job["id"]))
    smtp_sink.reply = "451 4.3.0 Try again later"
    received_ago(sessions, app_id, timedelta(hours=21), attempts=11)
    assert deliver(app_id) == "retry"
    with sessions() as s:
        due = s.get_one(OutboxEntry, app_id).next_attempt_at
        arrived = s.get_one(Application, app_id).received_at
    assert datetime.now(UTC) < due <= arrived + timedelta(hours=mail_settings.delivery_retry_hours)

    received_ago(sessions, app_id, timedelta(hours=24, seconds=1), attempts=12)
    assert deliver(app_id) == "failed"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"]) == ("failed", 13)
    assert shown["lastError"].startswith("gave up after 13 attempts: 451")


def test_an_operator_retry_gives_a_failed_copy_the_whole_retry_hours_again(
    api: Api,
    employer: Any,
    job: dict[str, Any],
    smtp_sink: SmtpSink,
    deliver: Deliver,
    sessions: sessionmaker[Session],
) -> None:
    """C8, C9 `jobpost outbox retry`: a copy that failed 30 hours after it arrived, sent back
    by an operator, meets a relay that greylists its first attempt (451): it waits for the
    next attempt rather than failing again at once, and its retries end 24 hours after the
    operator's retry, not after the application's arrival."""
    app_id = received(apply(api, job["id"]))
    smtp_sink.reply = "451 4.7.1 Greylisted, try again later"
    received_ago(sessions, app_id, timedelta(hours=30), attempts=14)
    assert deliver(app_id) == "failed"
    with sessions() as s:
        assert outbox.retry_failed(s, app_id, now=utcnow()) == [app_id]
        s.commit()
    assert deliver(app_id) == "retry"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"]) == ("pending", 1)

    with sessions() as s:  # the operator's retry was 24 hours ago and a second
        s.execute(
            update(OutboxEntry)
            .where(OutboxEntry.application_id == app_id)
            .values(
                retry_from=utcnow() - timedelta(hours=24, seconds=1),
                next_attempt_at=utcnow() - timedelta(seconds=1),
            )
        )
        s.commit()
    assert deliver(app_id) == "failed"
    assert api.get(f"{API}/applications/{app_id}", key=employer.key).json["status"] == "failed"


# --- C9: applicants' data never reaches a log line ----------------------------------------------

# How the test's trigger makes the database refuse an application: an error of its own, or a
# NOT NULL violation, whose DETAIL on PostgreSQL quotes the failing row (the email with it).
FORCED = {
    ("sqlite", "raised"): [
        "CREATE TRIGGER forced BEFORE INSERT ON applications "
        "BEGIN SELECT RAISE(ABORT, 'forced failure'); END"
    ],
    ("sqlite", "failing-row"): [
        "CREATE TRIGGER forced AFTER INSERT ON applications "
        "BEGIN UPDATE applications SET name = NULL WHERE id = NEW.id; END"
    ],
    ("postgresql", "raised"): [
        "CREATE FUNCTION forced() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'forced failure'; END $$",
        "CREATE TRIGGER forced BEFORE INSERT ON applications "
        "FOR EACH ROW EXECUTE FUNCTION forced()",
    ],
    ("postgresql", "failing-row"): [
        "CREATE FUNCTION forced() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN NEW.name := NULL; RETURN NEW; END $$",
        "CREATE TRIGGER forced BEFORE INSERT ON applications "
        "FOR EACH ROW EXECUTE FUNCTION forced()",
    ],
}
SAID = {  # what the log says of each
    ("sqlite", "raised"): "forced failure",
    ("sqlite", "failing-row"): "NOT NULL constraint failed: applications.name",
    ("postgresql", "raised"): "forced failure",
    ("postgresql", "failing-row"): 'null value in column "name"',
}


@pytest.mark.parametrize("how", ["raised", "failing-row"])
def test_a_database_error_storing_an_application_logs_none_of_its_values(
    how: str,
    api: Api,
    employer: Any,
    sessions: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The engines hide bound parameters, and PostgreSQL's DETAIL quoting the failing row
    (models.db.engines): the statement that failed is logged, the applicant's email, name and
    letter it carried are not. The database refuses the insert by a trigger of the test's
    (rolled back with the test's transaction)."""
    job = create_job(api, employer, status="active")
    with sessions() as s:
        backend = s.get_bind().dialect.name
        for statement in FORCED[backend, how]:
            s.execute(text(statement))
        s.commit()
    private = {"email": "ada.private@example.org", "name": "Ada Privata", "coverLetter": "Secretly"}
    with caplog.at_level(logging.INFO):
        result = api.post(f"{API}/jobs/{job['id']}/applications", json=applicant(**private))
    problem(result, 500, "internal_error")
    assert SAID[backend, how] in caplog.text  # the error and its statement were logged
    for value in private.values():
        assert value not in caplog.text
