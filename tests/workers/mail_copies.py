"""What the mail tests share (C8): an employer's copy of an application and its sender, a
plain copy (no résumé, no cover letter), the copy as `render` writes it and as a real SMTP
server receives it, and no relay connection kept from one test to the next (autouse)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest

from workers.mail import relay
from workers.mail.content import ApplicationCopy
from workers.mail.mime import render
from workers.mail.relay import SmtpSettings, send

RESUME = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\n%%EOF\n"
COPY = ApplicationCopy(
    application_id=42,
    job_id=7,
    job_title="Développeuse Python",
    reference_id="REF-2024-01",
    employer_name="Acme Québec",
    to="jobs@acme.example",
    name="Côté, Élodie",
    email="elodie@example.org",
    phone="+1 (514) 555-0199",
    cover_letter="Bonjour,\n<b>I</b> love Python & SQL.\nMerci",
    received_at=datetime(2024, 5, 6, 14, 30, 0, tzinfo=UTC),
    resume_filename="Elodie Cote CV.pdf",
    resume_content_type="application/pdf",
    resume=RESUME,
)
MAIL_FROM = "Jobpost <jobpost@jobs.example>"


@pytest.fixture(autouse=True)
def _no_connection_kept_between_tests() -> Iterator[None]:
    """`send` keeps its connection (workers.mail.relay.RELAY): each test starts and ends without."""
    relay.RELAY.close()
    yield
    relay.RELAY.close()


def parsed(copy: ApplicationCopy = COPY, mail_from: str = MAIL_FROM) -> EmailMessage:
    """The copy as `render` writes it, read back by the email package."""
    message = message_from_bytes(render(copy, mail_from=mail_from).data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def deliver(sink: Any, copy: ApplicationCopy = COPY) -> EmailMessage:
    send(render(copy, mail_from=MAIL_FROM), SmtpSettings(host=sink.host, port=sink.port))
    assert len(sink.messages) == 1
    received: EmailMessage = sink.messages[0]
    return received


PLAIN = dataclasses.replace(
    COPY,
    reference_id=None,
    phone=None,
    cover_letter=None,
    resume=None,
    resume_filename=None,
    resume_content_type=None,
)
