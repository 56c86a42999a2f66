"""The employer's copy of an application (C8 Delivery), built and sent by SMTP (C9)."""

from __future__ import annotations

import html
import re
import smtplib
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr


@dataclass(frozen=True)
class ApplicationCopy:
    """A snapshot of one application and its job: all a delivery needs (C8)."""

    application_id: int
    job_id: int | None
    job_title: str
    reference_id: str | None
    employer_name: str
    to: str
    name: str
    email: str
    phone: str | None
    cover_letter: str | None
    received_at: datetime
    resume_filename: str | None
    resume_content_type: str | None
    resume: bytes | None


@dataclass(frozen=True)
class SmtpSettings:
    """The outgoing relay (C9 `SMTP_*` and `MAIL_FROM`)."""

    host: str = "127.0.0.1"
    port: int = 1025
    user: str | None = None
    password: str | None = None
    starttls: bool = False
    timeout: float = 30.0
    mail_from: str = "jobpost@localhost"


class TransientFailure(Exception):
    """Connection refused, timeout or 4xx reply: retry later (C8)."""


class PermanentFailure(Exception):
    """A 5xx reply: never retry (C8)."""


def message_id(application_id: int, domain: str) -> str:
    """The Message-ID of an application's copy, the same on every attempt (C8)."""
    return f"<application-{application_id}@{domain}>"


def build_message(copy: ApplicationCopy, *, mail_from: str) -> EmailMessage:
    """The copy: To the job's address, Reply-To the applicant, text + HTML, résumé (C8)."""
    msg = EmailMessage()
    msg["To"] = copy.to
    msg["From"] = mail_from
    msg["Reply-To"] = _applicant_address(copy)
    msg["Subject"] = _subject(copy)
    msg["Message-ID"] = message_id(copy.application_id, _domain(mail_from))
    msg["Date"] = format_datetime(_utc(copy.received_at))
    rows = _rows(copy)
    msg.set_content(_text_body(rows, copy.cover_letter), cte="quoted-printable")
    msg.add_alternative(_html_body(rows, copy.cover_letter), subtype="html", cte="quoted-printable")
    if copy.resume is not None:
        _attach(msg, copy.resume, copy.resume_content_type, copy.resume_filename)
    return msg


def _attach(msg: EmailMessage, data: bytes, content_type: str | None, name: str | None) -> None:
    maintype, _, subtype = (content_type or "application/octet-stream").partition("/")
    msg.add_attachment(data, maintype, subtype or "octet-stream", filename=name or "resume")


def _utc(moment: datetime) -> datetime:
    """Aware UTC; a naive value (as SQLite returns) is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _applicant_address(copy: ApplicationCopy) -> Address:
    username, _, domain = copy.email.strip().rpartition("@")
    return Address(display_name=_one_line(copy.name), username=username, domain=domain)


def _subject(copy: ApplicationCopy) -> str:
    subject = f"New application: {copy.job_title}"
    if copy.reference_id is not None:
        subject += f" [{copy.reference_id}]"
    return _one_line(subject)


def _domain(mail_from: str) -> str:
    _, at, domain = parseaddr(mail_from)[1].rpartition("@")
    return domain if at and re.fullmatch(r"[A-Za-z0-9.-]+", domain) else "localhost"


def _rows(copy: ApplicationCopy) -> list[tuple[str, str]]:
    received = _utc(copy.received_at).isoformat().replace("+00:00", "Z")
    resume = (copy.resume_filename or "attached") if copy.resume is not None else "none"
    return [
        ("Job", copy.job_title),
        ("Reference ID", copy.reference_id or "none"),
        ("Job ID", str(copy.job_id) if copy.job_id is not None else "none (job deleted)"),
        ("Employer", copy.employer_name),
        ("Name", copy.name),
        ("Email", copy.email),
        ("Phone", copy.phone or "not given"),
        ("Received", received),
        ("Résumé", resume),
    ]


def _text_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
    lines = [f"{label}: {value}" for label, value in rows]
    return "\n".join([*lines, "", "Cover letter:", cover_letter or "(none)", ""])


def _html_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
    cells = "".join(
        f"<tr><th align='left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>\n"
        for k, v in rows
    )
    lines = (cover_letter or "(none)").splitlines()
    letter = "<br>\n".join(html.escape(line) for line in lines)
    return (
        "<!DOCTYPE html>\n<html><body>\n<h1>New application</h1>\n"
        f"<table>\n{cells}</table>\n<h2>Cover letter</h2>\n<p>{letter}</p>\n</body></html>\n"
    )


def send(message: EmailMessage, smtp: SmtpSettings) -> None:
    """Send by SMTP; raise TransientFailure or PermanentFailure with the server's reply."""
    try:
        conn = smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout)
        try:
            _deliver(conn, message, smtp)
        finally:
            _close(conn)
    except smtplib.SMTPRecipientsRefused as exc:
        code, text = next(iter(exc.recipients.values()))
        raise _failure(code, text) from exc
    except smtplib.SMTPConnectError as exc:
        raise TransientFailure(_reply(exc.smtp_code, exc.smtp_error)) from exc
    except smtplib.SMTPResponseException as exc:
        raise _failure(exc.smtp_code, exc.smtp_error) from exc
    except OSError as exc:  # refused, timeouts, disconnects, TLS errors
        raise TransientFailure(f"{type(exc).__name__}: {exc}") from exc


def _deliver(conn: smtplib.SMTP, message: EmailMessage, smtp: SmtpSettings) -> None:
    if smtp.starttls:
        conn.starttls(context=ssl.create_default_context())
        conn.ehlo()
    if smtp.user is not None:
        conn.login(smtp.user, smtp.password or "")
    conn.send_message(message)


def _close(conn: smtplib.SMTP) -> None:
    """QUIT politely; a failing QUIT must not undo a delivery already accepted."""
    try:
        conn.quit()
    except (smtplib.SMTPException, OSError):
        pass
    finally:
        conn.close()


def _reply(code: int, text: bytes | str) -> str:
    message = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return f"{code} {message}"


def _failure(code: int, text: bytes | str) -> TransientFailure | PermanentFailure:
    reply = _reply(code, text)
    return PermanentFailure(reply) if 500 <= code < 600 else TransientFailure(reply)
