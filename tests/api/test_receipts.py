"""C20: the applicant's receipt, sent in-process to a real SMTP server (aiosmtpd) in the
language of the page applied on, once, retried and swept as the copies are, never holding
the copy up, and cancelled by an erasure. Both backends."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.applications import outbox
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import (
    Application,
    Receipt,
)
from tests.api.applying import MAIL_FROM, applicant, received
from tests.api.applying import apply as post_application
from tests.api.test_pages import multipart
from tests.conftest import Account, Api, CheckedClient, SmtpSink
from tests.factories import create_job
from workers import delivery

BASE = "https://jobs.example.ca"
LINK = re.compile(rf"{re.escape(BASE)}/applications/status/([\w-]+)\?lang=(en|fr)")


@pytest.fixture
def queued() -> list[tuple[str, int]]:
    """What the app enqueued after commit, in order: ("copy" | "receipt", id)."""
    return []


@pytest.fixture
def app(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, queued: list[tuple[str, int]]
) -> WsgiApp:
    parts = Collaborators(
        enqueue=lambda app_id, rid: queued.append(("copy", app_id)),
        enqueue_receipt=lambda receipt_id: queued.append(("receipt", receipt_id)),
        limiter=ratelimit.Unlimited(),
    )
    return create_app(settings, sessions, parts, today=clock)


@pytest.fixture
def mail_settings(settings: Settings, smtp_sink: SmtpSink) -> Settings:
    return dataclasses.replace(
        settings,
        smtp_host=smtp_sink.host,
        smtp_port=smtp_sink.port,
        smtp_timeout=5,
        mail_from=MAIL_FROM,
        public_base_url=BASE,
    )


def receipt_of(sessions: sessionmaker[Session], app_id: int) -> Receipt:
    with sessions() as s:
        found = s.scalars(select(Receipt).where(Receipt.application_id == app_id)).one()
        s.expunge(found)
        return found


def body_of(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


def sent_link(message: EmailMessage) -> tuple[str, str]:
    found = LINK.search(body_of(message))
    assert found is not None, body_of(message)
    return found[1], found[2]


def applied_and_receipted(
    api: Api,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
    job_id: int,
    **headers: str,
) -> tuple[int, str]:
    """An application through the API, its receipt sent: its id and its link's token."""
    app_id = received(post_application(api, job_id, headers=headers or None))
    receipt = receipt_of(sessions, app_id)
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "sent"
    token, _ = sent_link(smtp_sink.messages[-1])
    return app_id, token


# --- the receipt ---------------------------------------------------------------------------


def test_an_application_queues_its_receipt_after_its_copy_in_a_row_of_its_own(
    api: Api, employer: Account, sessions: sessionmaker[Session], queued: list[tuple[str, int]]
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(post_application(api, job["id"]))
    receipt = receipt_of(sessions, app_id)
    assert queued == [("copy", app_id), ("receipt", receipt.id)]
    assert (receipt.status, receipt.attempts, receipt.digest) == ("pending", 0, None)
    assert receipt.language == "en" and not receipt.confidential
    honeypot = post_application(api, job["id"], applicant(website="https://spam.example"))
    assert honeypot.status_code == 202 and len(queued) == 2  # nothing stored, nothing queued


@pytest.mark.parametrize(
    ("lang", "subject", "phrases"),
    [
        (
            "en",
            "Your application: Baker",
            [
                "We received your application for Baker at Maple Corp.",
                "What happens next",
                "We keep them for 180 days, then delete them.",
                f"{BASE}/policies/privacy?lang=en",
            ],
        ),
        (
            "fr",
            "Votre candidature\u00a0: Baker",
            [
                "Nous avons reçu votre candidature pour Baker chez Maple Corp.",
                "La suite",
                "Nous les gardons 180 jours, puis les supprimons.",
                f"{BASE}/policies/privacy?lang=fr",
            ],
        ),
    ],
)
def test_the_form_s_receipt_is_in_the_page_s_language_and_never_names_the_employer_s_address(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
    lang: str,
    subject: str,
    phrases: list[str],
) -> None:
    job = create_job(api, employer, status="active", title="Baker")
    fields = {"name": "Zoé Roy", "email": "zoe@exemple.ca"}
    posted = CheckedClient(app).simulate_post(
        f"/jobs/{job['id']}/apply", params={"lang": lang}, **multipart(fields)
    )
    assert posted.status_code == 303
    with sessions() as s:
        app_id = s.scalars(select(Application.id)).one()
    receipt = receipt_of(sessions, app_id)
    assert receipt.language == lang
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "sent"
    [message] = smtp_sink.messages
    assert message["To"] == "zoe@exemple.ca" and message["Subject"] == subject
    assert message["Message-ID"] == f"<receipt-{receipt.id}@jobs.example>"
    assert smtp_sink.envelopes == [("jobpost@jobs.example", ["zoe@exemple.ca"])]
    words = body_of(message)
    for phrase in phrases:
        assert phrase in words, words
    assert sent_link(message)[1] == lang
    raw = message.as_string()
    assert job["applicationEmail"] not in raw and "maple.test" not in raw
    assert message["Reply-To"] is None
    # Sent once: a second run finds nothing to claim.
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "skipped"
    assert receipt_of(sessions, app_id).status == "sent" and len(smtp_sink.messages) == 1


def test_a_confidential_job_s_receipt_names_no_employer(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active", title="Baker", confidential=True)
    applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    [message] = smtp_sink.messages
    assert "We received your application for Baker." in body_of(message)
    assert "Maple" not in message.as_string()


def test_the_json_apply_s_receipt_follows_accept_language(
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active", title="Baker")
    app_id = received(post_application(api, job["id"], headers={"Accept-Language": "fr-CA"}))
    assert receipt_of(sessions, app_id).language == "fr"


def test_a_receipt_is_retried_after_a_relay_failure_and_its_copy_goes_on_alone(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(post_application(api, job["id"]))
    receipt = receipt_of(sessions, app_id)
    smtp_sink.reply = "451 4.3.0 try again later"
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "retry"
    retried = receipt_of(sessions, app_id)
    assert retried.status == "pending" and retried.attempts == 1
    assert "451" in (retried.last_error or "")
    smtp_sink.reply = None
    assert delivery.deliver(sessions, mail_settings, app_id) == "sent"  # the copy: not held up
    with sessions() as s:  # the retry comes due
        s.execute(update(Receipt).where(Receipt.id == receipt.id).values(next_attempt_at=utcnow()))
        s.commit()
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "sent"
    copy, receipt_mail = smtp_sink.messages
    assert copy["To"] == job["applicationEmail"]
    assert receipt_mail["To"] == "elodie@example.org"
    sent_link(receipt_mail)
    done = receipt_of(sessions, app_id)
    assert (done.status, done.attempts, done.last_error) == ("sent", 2, None)


def test_the_sweeper_sends_a_receipt_whose_message_was_lost(
    api: Api, employer: Account, sessions: sessionmaker[Session], mail_settings: Settings
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(post_application(api, job["id"]))
    receipt = receipt_of(sessions, app_id)
    timing = delivery.timing(mail_settings)
    with sessions() as s:
        assert outbox.sweep(s, now=utcnow(), timing=timing, box=outbox.RECEIPTS) == []
        later = utcnow() + timedelta(seconds=timing.sweep_grace_seconds + 1)
        assert outbox.sweep(s, now=later, timing=timing, box=outbox.RECEIPTS) == [receipt.id]


def test_without_public_base_url_no_receipt_is_sent(
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(post_application(api, job["id"]))
    unset = dataclasses.replace(mail_settings, public_base_url=None)
    assert delivery.deliver_receipt(sessions, unset, receipt_of(sessions, app_id).id) == "failed"
    assert "PUBLIC_BASE_URL" in (receipt_of(sessions, app_id).last_error or "")
    assert smtp_sink.messages == []


def test_the_metrics_count_receipts_by_status(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active")
    applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    received(post_application(api, job["id"]))
    text = CheckedClient(app).simulate_get("/metrics").text
    assert 'jobpost_receipts{status="sent"} 1.0' in text
    assert 'jobpost_receipts{status="pending"} 1.0' in text


def test_an_erasure_before_the_receipt_is_sent_cancels_it(
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active")
    app_id = received(post_application(api, job["id"]))
    receipt = receipt_of(sessions, app_id)
    assert api.delete(f"/api/v1.1/applications/{app_id}", key=employer.key).status_code == 204
    with sessions() as s:
        row = s.get_one(Receipt, receipt.id)
        assert row.application_id is None and row.erased_at is not None
        assert (row.status, row.last_error) == ("failed", "cancelled: the application was erased")
    assert delivery.deliver_receipt(sessions, mail_settings, receipt.id) == "skipped"
    assert smtp_sink.messages == []
