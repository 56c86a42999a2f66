"""The delivery outbox (C8): claims with a lease, retries kept in the database.

It holds five kinds of email (`Box`): the employer's copy of an application (C8, the table
`outbox`, by application), the operator's email of a fraud report (C13, `report_mails`, by
report), the emails of job alerts (C19, `alert_mails`, by id; `models.alerts.mails`) and the
applicants' receipts (C20, `receipts`, by id; `models.applications.receipts`), and the
notices of flagged addresses (C22, `address_notices`, by id; `models.applications.bounces`).
All have the same columns and go through the same transitions below.

The claims, leases, sweep and retries are models.db.leases's, on these two tables; what
stays here is the outbox's own: the claim's joined read of the application, and retries for
`retry_hours` from the application (or an operator's retry). The transitions are written
against the table rather than the entity: they run once per copy, and an UPDATE of the
entity goes through the ORM's bulk-update machinery for nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Row, Table, Update, and_, bindparam, func, or_, select
from sqlalchemy.orm import Session

from models.db import leases
from models.db.entities import (
    AddressNotice,
    AlertMail,
    Application,
    Employer,
    Job,
    JobReport,
    OutboxEntry,
    Receipt,
    ReportMail,
    Resume,
)

OUTBOX = cast(Table, OutboxEntry.__table__)
REPORT_MAILS = cast(Table, ReportMail.__table__)
ALERT_MAILS = cast(Table, AlertMail.__table__)
RECEIPT_MAILS = cast(Table, Receipt.__table__)
NOTICE_MAILS = cast(Table, AddressNotice.__table__)
APPLICATIONS = cast(Table, Application.__table__)
RESUMES = cast(Table, Resume.__table__)
EMPLOYERS = cast(Table, Employer.__table__)

STATUSES = ("pending", "sending", "sent", "failed")
# One kind of email in the outbox: its table, and the column naming what it is about.
Box = leases.Queue
# A copy the relay took may yet bounce (C22): undeliverable.
COPY_STATUSES = (*STATUSES, "undeliverable")
COPIES = Box(OUTBOX, "application_id", COPY_STATUSES, finished=("sent", "failed", "undeliverable"))
REPORTS = Box(REPORT_MAILS, "report_id", STATUSES, finished=("sent", "failed"))  # C13
ALERTS = Box(ALERT_MAILS, "id", STATUSES, finished=("sent", "failed"))  # C19
RECEIPTS = Box(RECEIPT_MAILS, "id", STATUSES, finished=("sent", "failed"))  # C20
NOTICES = Box(NOTICE_MAILS, "id", STATUSES, finished=("sent", "failed"))  # C22


@dataclass(frozen=True)
class Timing(leases.Timing):
    """The leases, and retries for `retry_hours` with a backoff from `retry_base_seconds`."""

    retry_base_seconds: float = 60
    retry_hours: float = 24

    @property
    def retries(self) -> leases.Retries:
        return leases.Retries(base_seconds=self.retry_base_seconds)


class Claim:
    """The claim of C8: pending (due) or sending (lease run out) → sending, with a lease and
    one attempt more, in one conditional UPDATE. If won, it returns the claimed row:
    `attempts`, `retry_from` and `lease_until` (the claim's own, which its finishing mark
    names), then the named `columns` of the entry's application, then
    the résumé's bytes as `resume` (None without one) if asked, then the employer's language
    as `language` (C13: as it is at the send, not at the application) if asked; None if not
    won. Statements are built once (models.db.leases).

    On PostgreSQL the claim and the read are one statement (UPDATE … FROM applications …
    RETURNING), one round trip. SQLite's RETURNING may only name the updated table (and
    SQLAlchemy writes the columns of a subquery in it unqualified), so there the row is read
    by a SELECT in the same transaction: in-process, a second statement costs nothing."""

    def __init__(self, *columns: str, resume: bool = False, language: bool = False) -> None:
        c, a, r = OUTBOX.c, APPLICATIONS.c, RESUMES.c
        self.claim = leases.claiming(COPIES)
        read: list[ColumnElement[Any]] = [
            c.attempts,
            c.retry_from,
            c.lease_until,
            *(a[name] for name in columns),
        ]
        resume_data = select(r.data).where(r.application_id == c.application_id)
        if resume:
            read.append(resume_data.correlate(OUTBOX).scalar_subquery().label("resume"))
        if language:
            spoken = select(EMPLOYERS.c.language).where(EMPLOYERS.c.id == a.employer_id)
            read.append(spoken.correlate(APPLICATIONS).scalar_subquery().label("language"))
        self.claim_and_read = self.claim.where(a.id == c.application_id).returning(*read)
        entry = c.application_id == bindparam("entry")
        self.read = select(*read).where(a.id == c.application_id, entry)

    def __call__(
        self, session: Session, application_id: int, *, now: datetime, timing: Timing
    ) -> Row[Any] | None:
        connection = session.connection()
        params = {"entry": application_id, "now": now, "lease": timing.lease_from(now)}
        if connection.dialect.name == "postgresql":
            return connection.execute(self.claim_and_read, params).one_or_none()
        if connection.execute(self.claim, params).rowcount != 1:
            return None
        return connection.execute(self.read, params).one()


_REPORTS_C = REPORT_MAILS.c
_REPORT_CLAIM = leases.claiming(REPORTS)
_REPORT_READ = (
    select(
        _REPORTS_C.attempts,
        _REPORTS_C.retry_from,
        _REPORTS_C.lease_until,
        JobReport.id,
        JobReport.job_id,
        JobReport.reason,
        JobReport.details,
        JobReport.email,
        JobReport.created_at,
        Job.title.label("job_title"),
        Job.reference_id.label("job_reference_id"),
        Employer.name.label("employer_name"),
    )
    .join(JobReport, JobReport.id == _REPORTS_C.report_id)
    .outerjoin(Job, Job.id == JobReport.job_id)
    .outerjoin(Employer, Employer.id == Job.employer_id)
    .where(_REPORTS_C.report_id == bindparam("entry"))
)


def claim_report(
    session: Session, report_id: int, *, now: datetime, timing: Timing
) -> Row[Any] | None:
    """The claim of C8 on a report's email (C13), then what the email says: the report and
    its job as they are now (None if not won). Two statements: a report is rare."""
    params = {"entry": report_id, "now": now, "lease": timing.lease_from(now)}
    if leases.changed(session, _REPORT_CLAIM, params) != 1:
        return None
    return session.execute(_REPORT_READ, {"entry": report_id}).one()


def _finishing(box: Box = COPIES, **values: object) -> Update:
    """sending → another state, for the entry bound as `entry` under the claim whose lease
    is bound as `token`; the lease ends. A worker whose lease ran out, and whose entry another
    worker has claimed since, changes nothing: its late outcome (a retry, say) must not undo
    the other's (sent). The lease is the claim's own: attempts would not tell the claims apart
    once an operator's retry has set them back to 0."""
    return leases.as_holder(box, lease_until=None, **values)


_SENT = {  # built once
    box: _finishing(box, status="sent", sent_at=bindparam("now"), last_error=None)
    for box in (COPIES, REPORTS, ALERTS, RECEIPTS, NOTICES)
}


def _finish(
    session: Session, application_id: int, lease: datetime, box: Box = COPIES, **values: object
) -> bool:
    params = {"entry": application_id, "token": lease}
    return leases.changed(session, _finishing(box, **values), params) == 1


def mark_sent(
    session: Session, application_id: int, *, now: datetime, lease: datetime, box: Box = COPIES
) -> bool:
    params = {"entry": application_id, "now": now, "token": lease}
    return leases.changed(session, _SENT[box], params) == 1


def mark_failed(
    session: Session, application_id: int, error: str, *, lease: datetime, box: Box = COPIES
) -> bool:
    return _finish(session, application_id, lease, box, status="failed", last_error=error[:2000])


def mark_undeliverable(
    session: Session, application_id: int, error: str, *, lease: datetime
) -> bool:
    """The relay refused the copy's recipient (C22): undeliverable, not failed."""
    return _finish(
        session, application_id, lease, COPIES, status="undeliverable", last_error=error[:2000]
    )


def backoff(attempts: int, timing: Timing, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter over the upper half: base * 2^(n-1) * [0.5, 1]."""
    delay = leases.backoff(max(attempts - 1, 0), timing.retries, rng)
    assert delay is not None  # an exponential backoff has no schedule to run out of
    return delay


def mark_retry(
    session: Session,
    application_id: int,
    error: str,
    *,
    now: datetime,
    since: datetime,
    attempts: int,
    lease: datetime,
    timing: Timing,
    box: Box = COPIES,
) -> str:
    """A transient failure: pending again at a later time, or failed once retries run out.

    Retries go on for the whole of retry_hours `since` the application arrived, or since an
    operator sent the failed copy back (C8): a backoff that would end past them is cut short,
    so the last attempt is made as they run out, rather than hours before for fear of
    overshooting them."""
    deadline = since + timedelta(hours=timing.retry_hours)
    if now >= deadline:
        gave_up = f"gave up after {attempts} attempts: {error}"
        mark_failed(session, application_id, gave_up, lease=lease, box=box)
        return "failed"
    next_at = min(now + timedelta(seconds=backoff(attempts, timing)), deadline)
    _finish(
        session,
        application_id,
        lease,
        box,
        status="pending",
        next_attempt_at=next_at,
        enqueued_at=None,
        last_error=error[:2000],
    )
    return "pending"


def sweep(
    session: Session, *, now: datetime, timing: Timing, limit: int = 1000, box: Box = COPIES
) -> list[int]:
    """Entries to enqueue now: pending and due and not enqueued within the grace, or left
    `sending` past their lease (a worker died mid-send). Marks them enqueued (C8).

    A lease that has run out is enqueued at once, without the grace: once per lease, since
    marking it enqueued after its lease ran out keeps the next sweeps off it. If that message
    is lost too, the grace brings it round again, as for a pending entry."""
    c = box.table.c
    stale = box.not_enqueued_since(timing.grace_before(now))
    unswept = or_(stale, c.enqueued_at < c.lease_until)  # since it ran out
    due = or_(and_(box.is_due(now), stale), and_(box.lapsed(now), unswept))
    marked = session.scalars(leases.sweeping(box, due, c.next_attempt_at, limit, enqueued_at=now))
    return sorted(marked)


def retry_failed(session: Session, application_id: int | None, *, now: datetime) -> list[int]:
    """Operators: failed entries (one, or all) back to pending, due now, with the whole of
    retry_hours from now for their retries (a relay that greylists the first attempt must not
    fail them again at once). One statement, so an entry a worker or another retry has taken
    meanwhile (no longer failed) is left as it is."""
    one = [] if application_id is None else [OUTBOX.c.application_id == application_id]
    retried = session.scalars(
        leases.retrying(
            COPIES, *one, next_attempt_at=now, enqueued_at=now, attempts=0, retry_from=now
        )
    )
    return sorted(retried)


def counts(session: Session, box: Box = COPIES) -> dict[str, int]:
    return leases.counts(session, box)


def oldest_pending_age(session: Session, *, now: datetime) -> float:
    """Seconds since the oldest undelivered application arrived (0 when none is waiting)."""
    oldest = select(func.min(Application.received_at)).join(OutboxEntry)
    return leases.oldest_age(session, oldest.where(COPIES.unfinished()), now=now)
