"""What an application's copy says (C8): its snapshot of the application, its subject,
its Message-ID and the rows of its text and HTML bodies. `mime` writes it as bytes."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.headerregistry import Address
from email.utils import parseaddr


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


def message_id(application_id: int, domain: str) -> str:
    """The Message-ID of an application's copy, the same on every attempt (C8)."""
    return f"<application-{application_id}@{domain}>"


def utc(moment: datetime) -> datetime:
    """Aware UTC; a naive value (as SQLite returns) is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _one_line(value: str) -> str:
    return " ".join(value.split())


def applicant_address(copy: ApplicationCopy) -> Address:
    """The applicant as the copy's Reply-To."""
    username, _, domain = copy.email.strip().rpartition("@")
    return Address(display_name=_one_line(copy.name), username=username, domain=domain)


def subject_of(copy: ApplicationCopy) -> str:
    """The job's title, and its reference in brackets when it has one, on one line."""
    subject = f"New application: {copy.job_title}"
    if copy.reference_id is not None:
        subject += f" [{copy.reference_id}]"
    return _one_line(subject)


def sender_domain(mail_from: str) -> str:
    """MAIL_FROM's domain, for the Message-ID; localhost when it has none fit for one."""
    _, at, domain = parseaddr(mail_from)[1].rpartition("@")
    return domain if at and re.fullmatch(r"[A-Za-z0-9.-]+", domain) else "localhost"


def summary_rows(copy: ApplicationCopy) -> list[tuple[str, str]]:
    """The labelled fields that both bodies list, in order."""
    received = utc(copy.received_at).isoformat().replace("+00:00", "Z")
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


def text_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
    lines = [f"{label}: {value}" for label, value in rows]
    return "\n".join([*lines, "", "Cover letter:", cover_letter or "(none)", ""])


def html_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
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
