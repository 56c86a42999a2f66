"""What an application's copy says (C8): its snapshot of the application, its subject,
its Message-ID and the rows of its text and HTML bodies, in the employer's language (C13),
from the templates in workers/mail/templates. `mime` writes it as bytes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from email.headerregistry import Address
from email.utils import parseaddr
from pathlib import Path

from models.core import i18n
from models.jobs import questions

TEMPLATES = i18n.environment(Path(__file__).parent / "templates")
i18n.precompile(TEMPLATES)


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
    answers: str | None = None  # as stored (models.jobs.questions, C21)
    knocked_out_by: str | None = None
    language: str = i18n.DEFAULT  # the employer's (C13)
    timezone: tzinfo = UTC  # the service's (TIMEZONE): the time the copy shows


def message_id(application_id: int, domain: str) -> str:
    """The Message-ID of an application's copy, the same on every attempt (C8)."""
    return f"<application-{application_id}@{domain}>"


def utc(moment: datetime) -> datetime:
    """Aware UTC; a naive value (as SQLite returns) is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# Whitespace but the no-break spaces French typography puts before « : » and the like (C13).
_SPACES = re.compile(r"(?:(?![\u00a0\u202f])\s)+")


def _one_line(value: str) -> str:
    return _SPACES.sub(" ", value).strip()


def applicant_address(copy: ApplicationCopy) -> Address:
    """The applicant as the copy's Reply-To."""
    username, _, domain = copy.email.strip().rpartition("@")
    return Address(display_name=_one_line(copy.name), username=username, domain=domain)


def subject_of(copy: ApplicationCopy) -> str:
    """The job's title, and its reference in brackets when it has one, on one line."""
    lang = i18n.language(copy.language)
    subject = lang.gettext("New application: %(title)s") % {"title": copy.job_title}
    if copy.reference_id is not None:
        subject += f" [{copy.reference_id}]"
    return _one_line(subject)


def sender_domain(mail_from: str) -> str:
    """MAIL_FROM's domain, for the Message-ID; localhost when it has none fit for one."""
    _, at, domain = parseaddr(mail_from)[1].rpartition("@")
    return domain if at and re.fullmatch(r"[A-Za-z0-9.-]+", domain) else "localhost"


def summary_rows(copy: ApplicationCopy) -> list[tuple[str, str]]:
    """The labelled fields that both bodies list, in order, in the copy's language."""
    lang = i18n.language(copy.language)
    _ = lang.gettext
    received = lang.moment(utc(copy.received_at).astimezone(copy.timezone))
    resume = (copy.resume_filename or _("attached")) if copy.resume is not None else _("none")
    job_id = str(copy.job_id) if copy.job_id is not None else _("none (job deleted)")
    return [
        (_("Job"), copy.job_title),
        (_("Reference ID"), copy.reference_id or _("none")),
        (_("Job ID"), job_id),
        (_("Employer"), copy.employer_name),
        (_("Name"), copy.name),
        (_("Email"), copy.email),
        (_("Phone"), copy.phone or _("not given")),
        (_("Received"), received),
        (_("Résumé"), resume),
        *_screening(copy, lang),
    ]


def _screening(copy: ApplicationCopy, lang: i18n.Language) -> list[tuple[str, str]]:
    """The answers to the screening questions, each under its question, and the mark of a
    knocked-out application first (C21)."""
    _ = lang.gettext
    rows: list[tuple[str, str]] = []
    entries = questions.answers_of(copy.answers)
    if copy.knocked_out_by is not None:
        asked = next((e["question"] for e in entries if e["questionId"] == copy.knocked_out_by), "")
        rows.append((_("Knocked out"), _("yes, by the answer to: %(q)s") % {"q": asked}))
    for e in entries:
        value = e["answer"]
        if "labels" in e:
            shown = ", ".join(e["labels"])
        elif isinstance(value, bool):
            shown = _("Yes") if value else _("No")
        else:
            shown = str(value)
        rows.append((e["question"], shown))
    return rows


def text_body(
    rows: list[tuple[str, str]], cover_letter: str | None, language: str = i18n.DEFAULT
) -> str:
    lang = i18n.language(language)
    return i18n.render(TEMPLATES, "copy.txt", lang, rows=rows, cover_letter=cover_letter)


def html_body(
    rows: list[tuple[str, str]], cover_letter: str | None, language: str = i18n.DEFAULT
) -> str:
    lang = i18n.language(language)
    return i18n.render(TEMPLATES, "copy.html", lang, rows=rows, cover_letter=cover_letter)
