"""The copy built part by part with `EmailMessage` (C8): plain to read, and the reference
`workers.mail.mime.render` is held to (tests/workers/test_mail_message.py); the workers bench sends
it in its plain smtplib loop."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import format_datetime

from models.applications import resumes
from workers.mail.content import (
    ApplicationCopy,
    applicant_address,
    html_body,
    message_id,
    sender_domain,
    subject_of,
    summary_rows,
    text_body,
    utc,
)
from workers.mail.mime import mime_type


def build_message(copy: ApplicationCopy, *, mail_from: str) -> EmailMessage:
    """The copy: To the job's address, Reply-To the applicant, text + HTML, résumé (C8)."""
    msg = EmailMessage()
    msg["To"] = copy.to
    msg["From"] = mail_from
    msg["Reply-To"] = applicant_address(copy)
    msg["Subject"] = subject_of(copy)
    msg["Message-ID"] = message_id(copy.application_id, sender_domain(mail_from))
    msg["Date"] = format_datetime(utc(copy.received_at))
    rows = summary_rows(copy)
    msg.set_content(text_body(rows, copy.cover_letter, copy.language), cte="quoted-printable")
    html = html_body(rows, copy.cover_letter, copy.language)
    msg.add_alternative(html, subtype="html", cte="quoted-printable")
    if copy.resume is not None:
        _attach(msg, copy.resume, copy.resume_content_type, copy.resume_filename)
    return msg


def _attach(msg: EmailMessage, data: bytes, content_type: str | None, name: str | None) -> None:
    maintype, subtype = mime_type(content_type)
    named = resumes.charset(f"{maintype}/{subtype}")
    params = {"charset": named} if named else None
    msg.add_attachment(data, maintype, subtype, filename=name or "resume", params=params)
