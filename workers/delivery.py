"""Delivering one application's copy (C8): claim, read, send with no transaction open,
record. A copy marked sent is never sent again; the one window (a crash after the
server's 250 and before the commit) re-sends with the same Message-ID."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from sqlalchemy import Row
from sqlalchemy.orm import Session, sessionmaker

from models.alerts import digests
from models.alerts import filters as alert_filters
from models.alerts import mails as alert_mails
from models.applications import bounces, outbox, receipts
from models.core.dates import today_in, utcnow
from models.core.settings import Settings
from models.db.entities import Application
from models.db.unit_of_work import (
    autocommit_sessions,
    commit,
    commit_within_lease,
    session_scope,
)
from models.webhooks.secrets import MissingKey, load_key
from workers.mail import alerts as alert_mail
from workers.mail import mime, receipt, relay
from workers.mail import notice as notice_mail
from workers.mail import report as report_mail
from workers.mail.content import ApplicationCopy

log = logging.getLogger("jobpost.delivery")

# The share of its lease a send may take (C12's delivery engine): past it the send gives up,
# whatever the pool, so the copy is recorded (sent, retry or failed) before the lease runs out
# and the sweeper hands it to another worker. 0.8 of the default 300 s is TASK_TIME_LIMIT.
SEND_SHARE_OF_LEASE = 0.8


def timing(settings: Settings) -> outbox.Timing:
    return outbox.Timing(
        lease_seconds=settings.outbox_lease_seconds,
        sweep_grace_seconds=settings.outbox_sweep_grace_seconds,
        retry_base_seconds=settings.delivery_retry_base_seconds,
        retry_hours=settings.delivery_retry_hours,
    )


def smtp_settings(settings: Settings) -> relay.SmtpSettings:
    return relay.SmtpSettings(
        host=settings.smtp_host,
        port=settings.smtp_port,
        user=settings.smtp_user,
        password=settings.smtp_password,
        starttls=settings.smtp_starttls,
        timeout=settings.smtp_timeout,
        mail_from=settings.mail_from,
    )


def copy_of(
    a: Application | Row[Any],
    resume: bytes | None,
    language: str | None = None,
    timezone: tzinfo = UTC,
) -> ApplicationCopy:
    """The employer's copy of an application, from its stored snapshot (C8): an Application,
    or a row with the same names (what `deliver` claims)."""
    return ApplicationCopy(
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
        answers=a.answers,
        knocked_out_by=a.knocked_out_by,
        language=language or "en",
        timezone=timezone,
    )


def bounce_sender(settings: Settings, application_id: int) -> str | None:
    """The copy's VERP envelope sender under BOUNCE_DOMAIN (C22); None without one. With no
    key to sign it (a worker that `jobpost worker` did not start), the copy still goes, from
    MAIL_FROM, and the log says why."""
    if settings.bounce_domain is None:
        return None
    try:
        key = _verp_key(settings.secret_key, settings.var_dir)
    except MissingKey as e:
        log.error("application %s: sent without a bounce address: %s", application_id, e)
        return None
    return bounces.envelope_sender(application_id, domain=settings.bounce_domain, key=key)


@functools.lru_cache(maxsize=4)
def _verp_key(secret_key: str | None, var_dir: Path) -> bytes:
    return bounces.verp_key(load_key(KeyOf(secret_key, var_dir)))


@dataclass(frozen=True)
class KeyOf:
    """The settings a key is read from (models.webhooks.secrets.KeySource)."""

    secret_key: str | None
    var_dir: Path


# The claim returns what the copy needs, so claiming and reading are one round trip (C8).
claim_copy = outbox.Claim(
    "id",
    "job_id",
    "job_title",
    "job_reference_id",
    "employer_name",
    "application_email",
    "name",
    "email",
    "phone",
    "cover_letter",
    "received_at",
    "resume_filename",
    "resume_content_type",
    "answers",
    "knocked_out_by",
    resume=True,
    language=True,
)


def deliver(sessions: sessionmaker[Session], settings: Settings, application_id: int) -> str:
    """One attempt. Returns "skipped" (not claimable: sent, failed, or another worker's),
    "undeliverable" (the relay refused the recipient, C22),
    "sent", "retry" (transient failure, due again later) or "failed"."""
    t = timing(settings)
    # Each step (the claim, then sent, retry or failed) is one statement, atomic by itself:
    # BEGIN and COMMIT around it would be two round trips that change nothing. On PostgreSQL
    # the statements commit by themselves, so one session and its pooled connection serve
    # every step, holding no transaction during the send (C8). Where sessions keep their
    # transactions (SQLite, a test's connection), the claim is committed before the send.
    steps = autocommit_sessions(sessions)
    each_commits = steps is not sessions
    with session_scope(steps) as s:
        claimed = claim_copy(s, application_id, now=utcnow(), timing=t)
        if claimed is None:
            return "skipped"
        if not each_commits:
            commit(s)
        return _send(s, sessions, steps, settings, t, claimed)


def _send(
    s: Session,
    sessions: sessionmaker[Session],
    steps: sessionmaker[Session],
    settings: Settings,
    t: outbox.Timing,
    claimed: Row[Any],
) -> str:
    """Send the claimed copy and record how it went, in the claiming session."""
    application_id = claimed.id
    resume = claimed.resume if claimed.resume_filename else None
    copy = copy_of(claimed, resume, claimed.language, settings.timezone)
    try:
        message = mime.render(
            copy, mail_from=settings.mail_from, bounces_to=bounce_sender(settings, application_id)
        )
    except ValueError as e:  # the copy's own data makes no safe message: no retry mends it
        outbox.mark_failed(
            s, application_id, f"the copy could not be written: {e}", lease=claimed.lease_until
        )
        log.error("application %s: the copy could not be written: %s", application_id, e)
        return "failed"
    since = claimed.retry_from or copy.received_at
    refused = functools.partial(_record_refused, s, sessions, claimed)
    return _attempt(s, steps, settings, t, claimed, message, since, outbox.COPIES, refused=refused)


def deliver_report(sessions: sessionmaker[Session], settings: Settings, report_id: int) -> str:
    """One attempt of the operator's email of a report (C13), as `deliver` makes a copy's:
    "skipped", "sent", "retry" or "failed". REPORTS_EMAIL unset since the report was made
    fails it: there is no one to send it to."""
    t = timing(settings)
    steps = autocommit_sessions(sessions)
    each_commits = steps is not sessions
    with session_scope(steps) as s:
        claimed = outbox.claim_report(s, report_id, now=utcnow(), timing=t)
        if claimed is None:
            return "skipped"
        if not each_commits:
            commit(s)
        box = outbox.REPORTS
        if settings.reports_email is None:
            outbox.mark_failed(
                s, report_id, "REPORTS_EMAIL is not set", lease=claimed.lease_until, box=box
            )
            log.warning("report %s: REPORTS_EMAIL is not set; its email is not sent", report_id)
            return "failed"
        try:
            message = report_mail.render(
                claimed,
                to=settings.reports_email,
                mail_from=settings.mail_from,
                base_url=settings.public_base_url,
            )
        except ValueError as e:
            error = f"the email could not be written: {e}"
            outbox.mark_failed(s, report_id, error, lease=claimed.lease_until, box=box)
            log.error("report %s: %s", report_id, error)
            return "failed"
        since = claimed.retry_from or claimed.created_at
        return _attempt(s, steps, settings, t, claimed, message, since, box)


def deliver_alert_mail(sessions: sessionmaker[Session], settings: Settings, mail_id: int) -> str:
    """One attempt of an email of a job alert (C19), as `deliver` makes a copy's: "skipped",
    "sent", "retry" or "failed". Its links' token is committed with the claim, before the
    send; an alert confirmed or unsubscribed since its confirmation was queued, or
    unsubscribed since its digest was, gets nothing ("failed", with the reason), and so does
    every alert email while PUBLIC_BASE_URL, the base of its absolute links, is unset. A
    digest lists its jobs as they are at the send: one whose jobs have all closed is not
    sent, and its alert's watermark moves all the same."""
    t = timing(settings)
    steps = autocommit_sessions(sessions)
    each_commits = steps is not sessions
    box = outbox.ALERTS
    with session_scope(steps) as s:
        claimed = alert_mails.claim(s, mail_id, now=utcnow(), timing=t)
        if claimed is None:
            return "skipped"
        if not each_commits:
            commit(s)
        row = claimed.row
        reason = _unsendable(claimed.token, settings, f"the alert is {row.state}")
        if reason is not None:
            return _refuse(s, row, reason, box, "alert email")
        assert claimed.token is not None and settings.public_base_url
        if row.kind == "digest":
            return _send_digest(s, sessions, settings, t, row, claimed.token)
        token, base_url = claimed.token, settings.public_base_url
        message = _written(
            s,
            row,
            box,
            "alert email",
            lambda: alert_mail.confirmation(
                row, token, mail_from=settings.mail_from, base_url=base_url, place=_place_of(s, row)
            ),
        )
        if message is None:
            return "failed"
        since = row.retry_from or row.created_at
        return _attempt(s, steps, settings, t, row, message, since, box)


def deliver_receipt(sessions: sessionmaker[Session], settings: Settings, receipt_id: int) -> str:
    """One attempt of an applicant's receipt (C20), as `deliver` makes a copy's: "skipped",
    "sent", "retry" or "failed". Its link's token is committed with the claim, before the
    send. A receipt whose application was erased since gets nothing, and neither does any
    while PUBLIC_BASE_URL, the base of its link, is unset ("failed", with the reason)."""
    t = timing(settings)
    steps = autocommit_sessions(sessions)
    each_commits = steps is not sessions
    box = outbox.RECEIPTS
    with session_scope(steps) as s:
        claimed = receipts.claim(s, receipt_id, now=utcnow(), timing=t)
        if claimed is None:
            return "skipped"
        if not each_commits:
            commit(s)
        row = claimed.row
        reason = _unsendable(claimed.token, settings, "the application was erased")
        if reason is not None:
            return _refuse(s, row, reason, box, "receipt")
        assert claimed.token is not None and settings.public_base_url
        token, base_url = claimed.token, settings.public_base_url
        message = _written(
            s,
            row,
            box,
            "receipt",
            lambda: receipt.render(
                row,
                token,
                mail_from=settings.mail_from,
                base_url=base_url,
                retention_days=settings.application_retention_days,
                timezone=settings.timezone,
            ),
        )
        if message is None:
            return "failed"
        since = row.retry_from or row.created_at
        return _attempt(s, steps, settings, t, row, message, since, box)


def deliver_notice(sessions: sessionmaker[Session], settings: Settings, notice_id: int) -> str:
    """One attempt of the notice of a flagged address (C22), as `deliver` makes a copy's:
    "skipped", "sent", "retry" or "failed". An employer that cleared its notification
    address since gets nothing ("failed", with the reason)."""
    t = timing(settings)
    steps = autocommit_sessions(sessions)
    each_commits = steps is not sessions
    box = outbox.NOTICES
    with session_scope(steps) as s:
        claimed = bounces.claim_notice(s, notice_id, now=utcnow(), timing=t)
        if claimed is None:
            return "skipped"
        if not each_commits:
            commit(s)
        row = claimed.row
        if row.notification_email is None:
            return _refuse(s, row, "the employer has no notification address now", box, "notice")
        message = _written(
            s,
            row,
            box,
            "notice",
            lambda: notice_mail.render(row, claimed.jobs, mail_from=settings.mail_from),
        )
        if message is None:
            return "failed"
        since = row.retry_from or row.created_at
        return _attempt(s, steps, settings, t, row, message, since, box)


def _unsendable(token: str | None, settings: Settings, gone: str) -> str | None:
    """Why a claimed email with a link cannot be sent (no token: `gone`), or None."""
    if token is None:
        return f"nothing to send: {gone}"
    if not settings.public_base_url:
        return "PUBLIC_BASE_URL is not set: its link would lead nowhere"
    return None


def _refuse(s: Session, row: Row[Any], reason: str, box: outbox.Box, what: str) -> str:
    """A claimed email marked failed for good, with the reason in the log."""
    outbox.mark_failed(s, row.id, reason, lease=row.lease_until, box=box)
    log.warning("%s %s: %s", what, row.id, reason)
    return "failed"


def _written(
    s: Session, row: Row[Any], box: outbox.Box, what: str, render: Callable[[], mime.Outgoing]
) -> mime.Outgoing | None:
    """The email `render` writes, or None once it is marked failed for what stopped it."""
    try:
        return render()
    except ValueError as e:
        error = f"the email could not be written: {e}"
        outbox.mark_failed(s, row.id, error, lease=row.lease_until, box=box)
        log.error("%s %s: %s", what, row.id, error)
        return None


def _place_of(s: Session, row: Row[Any]) -> str | None:
    """The name of an alert's place, as its search's words say it (C19), if it has one."""
    return alert_filters.place_name(s.connection(), alert_filters.from_query(row.filters))


def _send_digest(
    s: Session,
    sessions: sessionmaker[Session],
    settings: Settings,
    t: outbox.Timing,
    row: Row[Any],
    token: str,
) -> str:
    """Read a claimed digest's jobs as they are now, send it, and record it with the alert's
    new watermark in one transaction."""
    found = digests.contents(s.connection(), row, today=today_in(settings.timezone))
    steps = autocommit_sessions(sessions)
    if steps is sessions:
        commit(s)  # the read's transaction ends: the record is a transaction of its own
    if not found.jobs:
        reason = "nothing to send: every job of the digest has closed since it was planned"
        _record_digest(s, sessions, row, failed=reason)
        log.info("alert email %s: %s", row.id, reason)
        return "failed"
    assert settings.public_base_url
    try:
        message = alert_mail.digest(
            row,
            found,
            token,
            mail_from=settings.mail_from,
            base_url=settings.public_base_url,
            place=_place_of(s, row),
        )
    except ValueError as e:
        error = f"the email could not be written: {e}"
        outbox.mark_failed(s, row.id, error, lease=row.lease_until, box=outbox.ALERTS)
        log.error("alert email %s: %s", row.id, error)
        return "failed"
    since = row.retry_from or row.created_at
    record = functools.partial(_record_digest, s, sessions, row)
    return _attempt(s, steps, settings, t, row, message, since, outbox.ALERTS, record=record)


def _record_digest(
    s: Session, sessions: sessionmaker[Session], row: Row[Any], *, failed: str | None = None
) -> None:
    """The digest sent (or failed: `failed` says why) and its alert's watermark moved to the
    end of its range, in one transaction within the lease: the next digest starts there."""

    def mark(x: Session) -> bool:
        lease, box = row.lease_until, outbox.ALERTS
        if failed is None:
            done = outbox.mark_sent(x, row.id, now=utcnow(), lease=lease, box=box)
        else:
            done = outbox.mark_failed(x, row.id, failed, lease=lease, box=box)
        if done:
            digests.move_watermark(x, row.subscription_id, row.opened_until)
        return done

    # On PostgreSQL `s` commits each statement by itself: the two go in a session of their
    # own, a transaction; `s` gives its connection back first (it has nothing more to do).
    own = autocommit_sessions(sessions) is not sessions
    if own:
        s.close()
    tx = sessions() if own else s
    try:
        what = f"alert email {row.id} ({'failed' if failed else 'sent'})"
        commit_within_lease(tx, sessions, mark, lease=row.lease_until, what=what, logger=log)
    finally:
        if own:
            tx.close()


# What the log lines call an entry of each box.
WHAT = {
    id(outbox.COPIES): "application",
    id(outbox.ALERTS): "alert email",
    id(outbox.RECEIPTS): "receipt",
    id(outbox.NOTICES): "notice",
}


def _attempt(
    s: Session,
    steps: sessionmaker[Session],
    settings: Settings,
    t: outbox.Timing,
    claimed: Row[Any],
    message: mime.Outgoing,
    since: datetime,
    box: outbox.Box,
    *,
    record: Callable[[], None] | None = None,
    refused: Callable[[bounces.Notice], None] | None = None,
) -> str:
    """Send a claimed entry's message and record how it went, in the claiming session
    (`record`, when given, records it sent instead; `refused`, a recipient refused, C22)."""
    key, attempts = claimed.id, claimed.attempts
    what = WHAT.get(id(box), "report")
    lease_left = (claimed.lease_until - utcnow()).total_seconds()
    deadline = time.monotonic() + SEND_SHARE_OF_LEASE * lease_left
    try:
        relay.send(message, smtp_settings(settings), deadline=deadline)
    except relay.RecipientRefused as e:
        if refused is None:
            outbox.mark_failed(s, key, str(e), lease=claimed.lease_until, box=box)
            log.warning("%s %s: permanent failure: %s", what, key, e)
            return "failed"
        refused(bounces.refused(e.code, e.text))
        log.warning("%s %s: undeliverable, the relay refused it: %s", what, key, e)
        return "undeliverable"
    except relay.PermanentFailure as e:
        outbox.mark_failed(s, key, str(e), lease=claimed.lease_until, box=box)
        log.warning("%s %s: permanent failure: %s", what, key, e)
        return "failed"
    except relay.TransientFailure as e:
        state = outbox.mark_retry(
            s,
            key,
            str(e),
            now=utcnow(),
            since=since,
            attempts=attempts,
            lease=claimed.lease_until,
            timing=t,
            box=box,
        )
        log.info("%s %s: transient failure (%s): %s", what, key, state, e)
        return "retry" if state == "pending" else "failed"
    if record is None:
        _record_sent(s, steps, key, claimed.lease_until, box)
    else:
        record()
    return "sent"


def _record_refused(
    s: Session, sessions: sessionmaker[Session], claimed: Row[Any], notice: bounces.Notice
) -> None:
    """The copy undeliverable, its bounce, its event and its address's count, in one
    transaction within the lease (C22), as `_record_digest` records a digest."""
    application_id, lease = claimed.id, claimed.lease_until

    def mark(x: Session) -> bool:
        """Its webhook messages are sent by the sweeper, as this process has no broker."""
        error = f"{notice.status} {notice.diagnostic}"
        if not outbox.mark_undeliverable(x, application_id, error, lease=lease):
            return False
        bounces.record_refused(x, application_id, notice, now=utcnow())
        return True

    own = autocommit_sessions(sessions) is not sessions
    if own:
        s.close()
    tx = sessions() if own else s
    try:
        what = f"application {application_id} (undeliverable)"
        commit_within_lease(tx, sessions, mark, lease=lease, what=what, logger=log)
    finally:
        if own:
            tx.close()


def _record_sent(
    s: Session,
    steps: sessionmaker[Session],
    application_id: int,
    lease: datetime,
    box: outbox.Box = outbox.COPIES,
) -> None:
    """Mark the copy sent, and commit, within the lease: the relay has the copy, and a mark
    the database refuses is not the crash C8 allows a second copy for."""
    commit_within_lease(
        s,
        steps,
        lambda x: outbox.mark_sent(x, application_id, now=utcnow(), lease=lease, box=box),
        lease=lease,
        what=f"{WHAT.get(id(box), 'report')} {application_id} (sent)",
        logger=log,
    )
