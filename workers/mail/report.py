"""The operator's email of a fraud report (C13): what was reported, on which job, and the
commands that resolve it. In English: the operator's language (the service has no setting
for it). Plain text, written by workers.mail.mime with the copies' header guards: a job title
or an address cannot add a header or turn the body into HTML."""

from __future__ import annotations

from datetime import datetime
from email.utils import format_datetime
from typing import Any

from workers.mail import mime
from workers.mail.content import sender_domain, utc
from workers.mail.mime import Outgoing


def message_id(report_id: int, mail_from: str) -> str:
    """The same on every attempt, so a re-send in the crash window can be de-duplicated."""
    return f"<report-{report_id}@{sender_domain(mail_from)}>"


def _one_line(value: str) -> str:
    return " ".join(value.split())


def subject_of(report: Any) -> str:
    title = _one_line(report.job_title) if report.job_title else f"job {report.job_id}"
    return f"Fraud report #{report.id} ({report.reason}): {title}"


def body_of(report: Any, base_url: str | None) -> str:
    job = "(deleted since)" if report.job_id is None else str(report.job_id)
    lines = [
        f"A job was reported on {_when(report.created_at)}.",
        "",
        f"Report:    #{report.id}",
        f"Reason:    {report.reason}",
        f"Job:       {job}",
    ]
    if report.job_id is not None:
        lines += [
            f"Title:     {_one_line(report.job_title or '')}",
            f"Employer:  {report.employer_name or ''}",
            f"Reference: {report.job_reference_id or '(none)'}",
            f"Page:      {base_url or ''}/jobs/{report.job_id}",
        ]
    lines += [
        f"Reporter:  {report.email or '(no email given)'}",
        "",
        "Details:",
        report.details,
        "",
        "Resolve it with one of:",
        f"  jobpost reports resolve {report.id} --dismiss [--note TEXT]",
        f"  jobpost reports resolve {report.id} --take-down [--note TEXT]",
    ]
    return "\n".join(lines) + "\n"


def _when(moment: datetime) -> str:
    return utc(moment).strftime("%Y-%m-%d %H:%M UTC")


def render(report: Any, *, to: str, mail_from: str, base_url: str | None) -> Outgoing:
    """The email as sent, its headers guarded as the copy's (a job title holding encoded
    words or line breaks adds no header); ValueError when the report's own data makes no
    valid message."""
    return mime.render_text(
        mail_from=mail_from,
        to=to,
        reply_to=report.email,
        subject=subject_of(report),
        message_id=message_id(report.id, mail_from),
        date=format_datetime(utc(report.created_at)),
        body=body_of(report, base_url),
    )
