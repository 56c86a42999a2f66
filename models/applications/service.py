"""Applications (C8): the applicant's submission, and the employer's view of them."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, select, tuple_
from sqlalchemy.orm import Session, lazyload

from models.applications import receipts, resumes
from models.core import checks
from models.core.checks import Invalid
from models.core.errors import ApplyViaUrl, FieldError, JobGone, NotFound, ValidationFailed
from models.db.entities import Application, Employer, Job, OutboxEntry, Resume
from models.db.fast_reads import planned_for_values
from models.db.feed import Position, stamp
from models.jobs import questions
from models.reference.lists import URL_ROUTE

PHONE = re.compile(r"[0-9 +\-().]{1,30}")
DELIVERY_STATES = ("pending", "sending", "sent", "failed")
MAX_EMAIL = 254  # an address's longest path (RFC 5321, section 4.5.3.1.3, less the brackets)


@dataclass(frozen=True)
class Upload:
    """A résumé as received: multipart file part, or JSON {filename, content (base64)}."""

    filename: str | None
    data: bytes


@dataclass(frozen=True)
class Submission:
    name: str
    email: str
    phone: str | None
    cover_letter: str | None
    resume: tuple[str, resumes.ResumeKind, bytes] | None
    answers: questions.Answered = questions.NONE  # C21


# Intake reads the job's state, route and snapshot fields and its employer's name (joined);
# its locations and categories would be two more round trips per application, for nothing
# (the form's error page, which shows them, loads them when it does).
INTAKE_LOADS = (lazyload(Job.job_locations), lazyload(Job.job_categories))


def elsewhere(job: Job) -> str | None:
    """The address where a job routed to a URL takes its applications instead of here (C8)."""
    return job.application_url if job.routing_type == URL_ROUTE else None


def open_job(session: Session, job_id: int) -> Job:
    """The job an applicant may apply to: active (404 otherwise), routed by email (C8).

    On PostgreSQL the job row is share-locked until the application commits: a PUT or
    DELETE of the job in flight is waited for and its result read, and none can change the
    job before the application is stored. Unlocked, a job deleted meanwhile made the insert
    break its foreign key (a 500), and one archived or routed to a URL meanwhile still took
    the application, its snapshot (C8) of a job that no longer was. SQLite writers hold the
    whole database from their first statement."""
    job = session.get(
        Job,
        job_id,
        options=INTAKE_LOADS,
        populate_existing=True,
        with_for_update={"read": True, "of": Job},
    )
    if job is not None and job.taken_down:  # C13: removed after a report, said so
        raise JobGone(f"Job {job_id} was removed after a report.")
    if job is None or job.status != "active":
        raise NotFound(f"No open job has id {job_id}.")
    if url := elsewhere(job):
        raise ApplyViaUrl(url)
    return job


def check(fields: dict[str, Any], job: Job | None = None) -> Submission:
    """Every rule of C8 on the applicant's fields, and C21's on the answers to `job`'s
    screening questions; all broken rules at once."""
    errors: list[FieldError] = []

    def take(name: str, rule: Any) -> Any:
        try:
            return rule(fields.get(name))
        except Invalid as e:
            errors.append(e.error)
            return None

    name = take("name", lambda v: _required(v, "name", 100))
    email = take("email", lambda v: _required_email(v))
    phone = take("phone", _phone)
    letter = take("coverLetter", lambda v: _optional_text(v, "coverLetter", 10_000, multiline=True))
    resume = take("resume", _resume)
    answered = questions.NONE
    asked = questions.listed(job.questions) if job is not None else []
    try:
        answered = questions.answer(asked, fields.get("answers"))
    except Invalid as e:
        errors.append(e.error)
    except ValidationFailed as e:
        errors.extend(e.errors)
    if errors:
        raise ValidationFailed(errors, subject="application")
    return Submission(name, email, phone, letter, resume, answered)


def _required(value: Any, field: str, max_len: int) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise Invalid(field, "required", f"{field} is required.")
    return checks.string(value, field, max_len=max_len, trim=True)


def _required_email(value: Any) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise Invalid("email", "required", "email is required.")
    return checks.email(value, "email", max_len=MAX_EMAIL)


def _optional_text(value: Any, field: str, max_len: int, *, multiline: bool = False) -> str | None:
    if value is None or value == "":
        return None
    text = checks.string(value, field, max_len=max_len, min_len=0, multiline=multiline)
    return text if text.strip() else None


def _phone(value: Any) -> str | None:
    text = _optional_text(value, "phone", 30)
    if text is None:
        return None
    text = text.strip()
    if not PHONE.fullmatch(text) or not any(c.isdigit() for c in text):
        raise Invalid("phone", "invalid_format", "phone has digits, spaces and + - ( ) . only.")
    return text


def _resume(value: Any) -> tuple[str, resumes.ResumeKind, bytes] | None:
    if value is None:
        return None
    upload = value if isinstance(value, Upload) else _json_upload(value)
    if len(upload.data) > resumes.MAX_RESUME_BYTES:
        raise Invalid("resume", "file_too_large", "A résumé is at most 5 MiB.")
    kind = resumes.detect(upload.data)
    if kind is None:
        raise Invalid(
            "resume", "file_type_not_allowed", "A résumé is a PDF, DOC, DOCX, ODT, RTF or TXT file."
        )
    return resumes.safe_filename(upload.filename, kind), kind, upload.data


def _json_upload(value: Any) -> Upload:
    obj = checks.obj(value, "resume")
    filename = obj.get("filename")
    if filename is not None:
        filename = checks.string(filename, "resume.filename", max_len=255)
    content = obj.get("content")
    if content is None:
        raise Invalid("resume.content", "required", "resume.content is required.")
    text = checks.string(
        content, "resume.content", max_len=16 * 1024 * 1024, min_len=0, multiline=True
    )
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        message = "resume.content must be base64."
        raise Invalid("resume.content", "invalid_format", message) from None
    return Upload(filename, data)


def submit(session: Session, job: Job, sub: Submission) -> Application:
    """Store the application, its résumé and its outbox entry in the caller's transaction.

    The snapshot of the job (title, referenceId, address, employer) lets delivery go on
    after the job is deleted (C8). A knocked-out application (C21) is stored and marked
    all the same; it gets no outbox entry, and no copy, when its employer has
    `email_knocked_out` off.
    """
    now = stamp(session)  # receivedAt, the applications feed's time (C10)
    application = Application(
        job_id=job.id,
        employer_id=job.employer_id,
        name=sub.name,
        email=sub.email,
        phone=sub.phone,
        cover_letter=sub.cover_letter,
        received_at=now,
        job_title=job.title,
        job_reference_id=job.reference_id,
        application_email=job.application_email or "",
        employer_name=job.employer.name,
        answers=sub.answers.stored,
        knocked_out_by=sub.answers.knocked_out_by,
    )
    if sub.resume is not None:
        filename, kind, data = sub.resume
        application.resume_filename = filename
        application.resume_content_type = kind.content_type
        application.resume_size = len(data)
    # Counted as enqueued now: the after-commit enqueue follows; if the broker is down,
    # the sweeper enqueues it once OUTBOX_SWEEP_GRACE_SECONDS have passed (C8).
    if sub.answers.knocked_out_by is None or job.employer.email_knocked_out:
        application.outbox = OutboxEntry(
            status="pending", attempts=0, next_attempt_at=now, enqueued_at=now
        )
    session.add(application)
    session.flush()
    if sub.resume is not None:
        session.add(Resume(application_id=application.id, data=sub.resume[2]))
        session.flush()
    return application


def get(session: Session, employer: Employer, application_id: int) -> Application:
    application = session.get(Application, application_id)
    if application is None or application.employer_id != employer.id:
        raise NotFound(f"No application has id {application_id}.")
    return application


def resume_bytes(session: Session, application: Application) -> bytes:
    resume = session.get(Resume, application.id)
    if resume is None:
        raise NotFound(f"Application {application.id} has no résumé.")
    return resume.data


@dataclass(frozen=True)
class Page:
    applications: list[Application]
    total: int


def listing(
    session: Session,
    employer: Employer,
    *,
    job_id: int | None,
    status: str | None,
    limit: int,
    offset: int,
    received_since: datetime | None = None,
) -> Page:
    """The employer's applications, newest first (C8, paged as C6); with `received_since`,
    those received at or after it (C10)."""
    query = _of(employer, job_id, status)
    if received_since is not None:
        query = query.where(Application.received_at >= received_since)
    with planned_for_values(session.connection()):
        total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
        rows = session.scalars(
            query.order_by(Application.received_at.desc(), Application.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return Page(list(rows.unique()), total)


def _of(employer: Employer, job_id: int | None, status: str | None) -> Select[Any]:
    query = select(Application).where(Application.employer_id == employer.id)
    if job_id is not None:
        query = query.where(Application.job_id == job_id)
    if status is not None:
        query = query.join(OutboxEntry).where(OutboxEntry.status == status)
    return query


@dataclass(frozen=True)
class Changes:
    applications: list[Application]
    resume: Position  # where the next page starts: after the last one, or where this started


def changes(
    session: Session,
    employer: Employer,
    *,
    job_id: int | None,
    status: str | None,
    after: Position,
    until: datetime,
    limit: int,
) -> Changes:
    """The applications feed (C10): by (receivedAt, id) ascending after `after`, up to
    `until` (the present less the lag), at most `limit`. An application's receivedAt never
    moves, so each comes once; its delivery status is as of the read."""
    # Bound as the column's type (UTC, no offset): compared as timestamptz, PostgreSQL would
    # shift the column by the session's TimeZone.
    instant = Application.received_at.type
    query = _of(employer, job_id, status).where(
        tuple_(Application.received_at, Application.id)
        > tuple_(bindparam("at", after.at, type_=instant), bindparam("after_id", after.id)),
        Application.received_at <= bindparam("until", until, type_=instant),
    )
    found = list(
        session.scalars(
            query.order_by(Application.received_at, Application.id).limit(limit)
        ).unique()
    )
    resume = Position(found[-1].received_at, found[-1].id) if found else after
    return Changes(found, resume)


def purge(session: Session, *, now: datetime, retention_days: int) -> int:
    """Delete applications older than the retention whose delivery is over (C8)."""
    cutoff = now - timedelta(days=retention_days)
    # FOR UPDATE: on PostgreSQL a copy an operator sends back (failed → pending) while the
    # purge runs is locked first and its new status checked again, so it is left alone, where
    # the plain subquery's snapshot still saw it failed and the cascade deleted it pending.
    over = (
        select(OutboxEntry.application_id)
        .join(Application)
        .where(OutboxEntry.status.in_(("sent", "failed")), Application.received_at < cutoff)
        .with_for_update(of=OutboxEntry)
    )
    # An application kept from the mail (knocked out, C21) has no delivery: over at once.
    unsent = (
        ~select(OutboxEntry.application_id)
        .where(OutboxEntry.application_id == Application.id)
        .exists()
    )
    old = Application.id.in_(over) | (unsent & (Application.received_at < cutoff))
    # Résumés and outbox entries go with them: ON DELETE CASCADE (foreign keys are on in SQLite).
    result = session.execute(delete(Application).where(old))
    receipts.purge_erased(session, cutoff=cutoff)  # C20: links of applications gone
    return int(result.rowcount)  # type: ignore[attr-defined]
