"""Delivering one application's copy (C8): claim, read, send with no transaction open,
record. A copy marked sent is never sent again; the one window (a crash after the
server's 250 and before the commit) re-sends with the same Message-ID."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from models import outbox
from models.dates import utcnow
from models.db import session_scope
from models.entities import Application, Resume
from models.settings import Settings
from workers import mail

log = logging.getLogger("jobpost.delivery")


def timing(settings: Settings) -> outbox.Timing:
    return outbox.Timing(
        lease_seconds=settings.outbox_lease_seconds,
        sweep_grace_seconds=settings.outbox_sweep_grace_seconds,
        retry_base_seconds=settings.delivery_retry_base_seconds,
        retry_hours=settings.delivery_retry_hours,
    )


def smtp_settings(settings: Settings) -> mail.SmtpSettings:
    return mail.SmtpSettings(
        host=settings.smtp_host,
        port=settings.smtp_port,
        user=settings.smtp_user,
        password=settings.smtp_password,
        starttls=settings.smtp_starttls,
        timeout=settings.smtp_timeout,
        mail_from=settings.mail_from,
    )


def copy_of(a: Application, resume: bytes | None) -> mail.ApplicationCopy:
    """The employer's copy of an application, from its stored snapshot (C8)."""
    return mail.ApplicationCopy(
        application_id=a.id,
        job_id=a.job_id,
        job_title=a.job_title,
        reference_id=a.job_reference_id,
        employer_name=a.employer_name,
        to=a.application_email,
        name=a.name,
        email=a.email,
        phone=a.phone,
        cover_letter=a.cover_letter,
        received_at=a.received_at,
        resume_filename=a.resume_filename,
        resume_content_type=a.resume_content_type,
        resume=resume,
    )


def _copy(session: Session, application_id: int) -> tuple[mail.ApplicationCopy, int]:
    a = session.get_one(Application, application_id)
    resume = session.get(Resume, application_id) if a.resume_filename else None
    return copy_of(a, resume.data if resume else None), a.outbox.attempts


def deliver(sessions: sessionmaker[Session], settings: Settings, application_id: int) -> str:
    """One attempt. Returns "skipped" (not claimable: sent, failed, or another worker's),
    "sent", "retry" (transient failure, due again later) or "failed"."""
    t = timing(settings)
    with session_scope(sessions) as s:
        if not outbox.claim(s, application_id, now=utcnow(), timing=t):
            return "skipped"
        copy, attempts = _copy(s, application_id)
    message = mail.render(copy, mail_from=settings.mail_from)
    try:
        mail.send(message, smtp_settings(settings))
    except mail.PermanentFailure as e:
        with session_scope(sessions) as s:
            outbox.mark_failed(s, application_id, str(e))
        log.warning("application %s: permanent failure: %s", application_id, e)
        return "failed"
    except mail.TransientFailure as e:
        with session_scope(sessions) as s:
            state = outbox.mark_retry(
                s,
                application_id,
                str(e),
                now=utcnow(),
                received_at=copy.received_at,
                attempts=attempts,
                timing=t,
            )
        log.info("application %s: transient failure (%s): %s", application_id, state, e)
        return "retry" if state == "pending" else "failed"
    with session_scope(sessions) as s:
        outbox.mark_sent(s, application_id, now=utcnow())
    return "sent"
