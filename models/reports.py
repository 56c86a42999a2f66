"""Fraud reports on jobs, and taking a job down (C13): Ontario's duty on job-posting platforms.

Anyone may report an active job; the operator reads the reports and dismisses each or takes
its job down. A job taken down is archived and stays down: no write makes it active again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from models.core import checks
from models.core.dates import utcnow
from models.core.errors import FieldError, JobGone, NotFound, ValidationFailed
from models.db.entities import Job, JobReport, ReportMail
from models.jobs import events as job_events
from models.notifications import queue as notifications
from models.webhooks import messages as webhook_messages

REASONS = ("scam", "misleading", "discriminatory", "other")
STATUSES = ("open", "dismissed", "taken_down")
MAX_DETAILS = 2000


def read_body(body: dict[str, Any]) -> tuple[str, str, str | None]:
    """A report's reason, details and email, or the 422 of every broken rule (C1)."""
    errors: list[FieldError] = []
    reason = body.get("reason")
    if reason is None or reason == "":
        errors.append(FieldError("reason", "required", "reason is required."))
    elif not isinstance(reason, str):
        errors.append(FieldError("reason", "invalid_type", "reason must be a string."))
    elif reason not in REASONS:
        message = "reason must be scam, misleading, discriminatory or other."
        errors.append(FieldError("reason", "out_of_range", message))
    details: str | None = None
    raw = body.get("details")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        errors.append(FieldError("details", "required", "details is required."))
    else:
        try:
            details = checks.string(raw, "details", max_len=MAX_DETAILS, trim=True, multiline=True)
        except checks.Invalid as e:
            errors.append(e.error)
    email: str | None = None
    if body.get("email") not in (None, ""):
        try:
            email = checks.email(body["email"], "email", max_len=254)
        except checks.Invalid as e:
            errors.append(e.error)
    if errors:
        raise ValidationFailed(errors, subject="report")
    assert isinstance(reason, str) and details is not None
    return reason, details, email


def taken_down(session: Session, job_id: int) -> bool:
    """Whether the job was taken down: its public pages say it was removed (410, C13)."""
    return bool(session.scalar(select(Job.taken_down).where(Job.id == job_id)))


def job_for_report(session: Session, job_id: int) -> Job:
    """The job a report may be about: an active one. A taken-down job is 410; a draft, an
    archived or an unknown job is 404 (C13)."""
    job = session.get(Job, job_id)
    if job is not None and job.taken_down:
        raise JobGone(f"Job {job_id} was removed after a report.")
    if job is None or job.status != "active":
        raise NotFound(f"No active job has id {job_id}.")
    return job


def create(
    session: Session, job_id: int, body: dict[str, Any], *, notify: bool = False
) -> JobReport:
    """Store a report on an active job (`job_for_report`), after the 404 or 410 (C1). With
    `notify` (REPORTS_EMAIL set), the operator's email goes in the outbox in the same
    transaction (C13), for the workers to send."""
    job_for_report(session, job_id)
    reason, details, email = read_body(body)
    now = utcnow()
    report = JobReport(
        job_id=job_id,
        reason=reason,
        details=details,
        email=email,
        status="open",
        created_at=now,
    )
    session.add(report)
    session.flush()
    if notify:
        session.add(ReportMail(report_id=report.id, next_attempt_at=now, enqueued_at=now))
        session.flush()
    return report


def counts(session: Session) -> dict[str, int]:
    """Reports by status, for `jobpost_job_reports{status}` (C13)."""
    rows = session.execute(select(JobReport.status, func.count()).group_by(JobReport.status))
    found = {status: int(n) for status, n in rows}
    return {s: found.get(s, 0) for s in STATUSES}


@dataclass(frozen=True)
class Shown:
    """A report as the CLI shows it (C13); api.representations.report is its JSON."""

    id: int
    job_id: int | None
    reason: str
    details: str
    email: str | None
    status: str
    created_at: datetime
    resolved_at: datetime | None
    note: str | None


def shown(report: JobReport) -> Shown:
    return Shown(
        report.id,
        report.job_id,
        report.reason,
        report.details,
        report.email,
        report.status,
        report.created_at,
        report.resolved_at,
        report.note,
    )


def listing(session: Session, status: str | None = None) -> list[Shown]:
    stmt = select(JobReport).order_by(JobReport.id)
    if status is not None:
        stmt = stmt.where(JobReport.status == status)
    return [shown(r) for r in session.scalars(stmt)]


def get(session: Session, report_id: int) -> JobReport:
    report = session.get(JobReport, report_id)
    if report is None:
        raise NotFound(f"No report has id {report_id}.")
    return report


@dataclass(frozen=True)
class Resolved:
    """A resolved report, and the webhook deliveries its take-down queued (C12), which the
    caller enqueues once committed (the sweeper sends any it could not)."""

    report: Shown
    deliveries: list[int]


def resolve(session: Session, report_id: int, *, take_down: bool, note: str | None) -> Resolved:
    """Dismiss a report, or take its job down: archived, `takenDown`, `updatedAt` and its
    version moved (so no cached copy of it is served), and `job.taken_down` emitted (C12).
    Resolving a resolved report again is refused: the operator's first decision stands."""
    report = session.get(JobReport, report_id, with_for_update=True)
    if report is None:
        raise NotFound(f"No report has id {report_id}.")
    if report.status != "open":
        raise ValueError(f"report {report_id} is already {report.status}")
    now = utcnow()
    report.status = "taken_down" if take_down else "dismissed"
    report.resolved_at, report.note = now, note
    if take_down and report.job_id is not None:
        was = session.scalar(select(Job.status).where(Job.id == report.job_id))
        if was == "active":  # its pages leave the search engines (C18)
            notifications.jobs_changed(session, deleted=[report.job_id], now=now)
        session.execute(
            update(Job)
            .where(Job.id == report.job_id)
            .values(status="archived", taken_down=True, updated_at=now, version=Job.version + 1)
        )
    session.flush()
    queued: list[int] = []
    if take_down and report.job_id is not None:
        rows = session.execute(select(Job.id, Job.employer_id).where(Job.id == report.job_id)).all()
        messages = job_events.announce(session, "job.taken_down", rows, now=now)
        queued = webhook_messages.pending_of(session, messages, now=now)
    return Resolved(shown(report), queued)
