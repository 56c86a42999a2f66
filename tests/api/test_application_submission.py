"""C8 Applications over the API: the public submission and the employer's view of it, the
after-commit enqueue, and no applicant's data in a log line (C9)."""

from __future__ import annotations

import dataclasses
import logging
import queue
import socket
import time
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from api import forms, ratelimit
from api.app import Collaborators, create_app
from models.core.settings import Settings
from models.db.entities import OutboxEntry
from tests.api.applying import (
    API,
    PDF,
    Enqueued,
    MiB,
    applicant,
    apply,
    b64,
    close_to_now,
    listed,
    multipart,
    received,
)
from tests.api.applying import app as app
from tests.api.applying import enqueued as enqueued
from tests.api.applying import job as job
from tests.conftest import Api
from tests.factories import create_job, entries, problem
from tests.resume_files import DOC_BYTES, DOCX_BYTES
from workers import enqueue
from workers.app import make_celery

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
        "answers": [],  # the job asks no screening question (C21)
        "knockedOut": False,
        "knockedOutBy": None,
        "bounce": None,
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
