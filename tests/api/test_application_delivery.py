"""C8 Delivery of the copy, in-process against a real SMTP server: a deleted job's application,
the subject, permanent and transient refusals, retries and the operator's retry."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from models.applications import outbox
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import Application, OutboxEntry
from tests.api.applying import API, MAIL_FROM, PDF, applicant, apply, close_to_now, listed, received
from tests.api.applying import app as app
from tests.api.applying import enqueued as enqueued
from tests.api.applying import job as job
from tests.conftest import Api, SmtpSink
from tests.factories import create_job, problem
from workers import delivery

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


def test_a_recipient_refused_for_good_is_undeliverable_with_its_bounce(
    api: Api, employer: Any, job: dict[str, Any], smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    """C22: a 5xx to RCPT says the address is no good: the copy is undeliverable, for good."""
    app_id = received(apply(api, job["id"]))
    smtp_sink.reply = "550 5.1.1 Mailbox unavailable"
    assert deliver(app_id) == "undeliverable"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["sentAt"]) == ("undeliverable", 1, None)
    assert "550" in shown["lastError"]
    bounce = shown["bounce"]
    assert (bounce["permanent"], bounce["status"], bounce["reason"]) == (
        True,
        "5.1.1",
        "mailbox_unknown",
    )
    assert bounce["source"] == "smtp" and bounce["diagnostic"] == "550 5.1.1 Mailbox unavailable"
    smtp_sink.reply = None
    assert deliver(app_id) == "skipped"
    assert smtp_sink.messages == []
    assert api.get(f"{API}/applications/{app_id}", key=employer.key).json == shown


def test_a_message_refused_for_good_fails_for_good(
    api: Api, employer: Any, job: dict[str, Any], smtp_sink: SmtpSink, deliver: Deliver
) -> None:
    """A 5xx to DATA refuses this message, not the address: failed, with no bounce (C8)."""
    app_id = received(apply(api, job["id"]))
    smtp_sink.data_reply = "554 5.6.0 Message refused"
    assert deliver(app_id) == "failed"
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert (shown["status"], shown["attempts"], shown["sentAt"]) == ("failed", 1, None)
    assert "554" in shown["lastError"] and shown["bounce"] is None
    smtp_sink.data_reply = None
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
