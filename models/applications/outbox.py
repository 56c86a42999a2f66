"""The delivery outbox (C8): claims with a lease, retries kept in the database.

It holds two kinds of email (`Box`): the employer's copy of an application (C8, the table
`outbox`, by application) and the operator's email of a fraud report (C13, `report_mails`,
by report). Both have the same columns and go through the same transitions below.

Every transition is one conditional UPDATE, so it behaves the same on SQLite and
PostgreSQL and holds no lock while a worker talks to the SMTP server. The transitions of a
delivery are written against the table rather than the entity: they run once per copy, and
an UPDATE of the entity goes through the ORM's bulk-update machinery for nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Row, Table, Update, and_, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from models.db.entities import (
    Application,
    Employer,
    Job,
    JobReport,
    OutboxEntry,
    ReportMail,
    Resume,
)

OUTBOX = cast(Table, OutboxEntry.__table__)
REPORT_MAILS = cast(Table, ReportMail.__table__)
APPLICATIONS = cast(Table, Application.__table__)
RESUMES = cast(Table, Resume.__table__)
EMPLOYERS = cast(Table, Employer.__table__)


@dataclass(frozen=True)
class Box:
    """One kind of email in the outbox: its table, and the column naming what it is about."""

    table: Table
    key: str

    @property
    def key_column(self) -> ColumnElement[int]:
        return cast(ColumnElement[int], self.table.c[self.key])


COPIES = Box(OUTBOX, "application_id")  # C8
REPORTS = Box(REPORT_MAILS, "report_id")  # C13


@dataclass(frozen=True)
class Timing:
    lease_seconds: float = 300
    sweep_grace_seconds: float = 120
    retry_base_seconds: float = 60
    retry_hours: float = 24


class Claim:
    """The claim of C8: pending (due) or sending (lease run out) → sending, with a lease and
    one attempt more, in one conditional UPDATE. If won, it returns the claimed row:
    `attempts`, `retry_from` and `lease_until` (the claim's own, which its finishing mark
    names), then the named `columns` of the entry's application, then
    the résumé's bytes as `resume` (None without one) if asked, then the employer's language
    as `language` (C13: as it is at the send, not at the application) if asked; None if not
    won. Statements
    are built once: building and keying one costs more than running it.

    On PostgreSQL the claim and the read are one statement (UPDATE … FROM applications …
    RETURNING), one round trip. SQLite's RETURNING may only name the updated table (and
    SQLAlchemy writes the columns of a subquery in it unqualified), so there the row is read
    by a SELECT in the same transaction: in-process, a second statement costs nothing."""

    def __init__(self, *columns: str, resume: bool = False, language: bool = False) -> None:
        c, a, r = OUTBOX.c, APPLICATIONS.c, RESUMES.c
        now = bindparam("now", type_=c.next_attempt_at.type)
        claimable = or_(
            and_(c.status == "pending", c.next_attempt_at <= now),
            and_(c.status == "sending", c.lease_until < now),
        )
        self.claim = (
            update(OUTBOX)
            .where(c.application_id == bindparam("entry"), claimable)
            .values(status="sending", attempts=c.attempts + 1, lease_until=bindparam("lease"))
        )
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
        lease = now + timedelta(seconds=timing.lease_seconds)
        params = {"entry": application_id, "now": now, "lease": lease}
        if connection.dialect.name == "postgresql":
            return connection.execute(self.claim_and_read, params).one_or_none()
        if connection.execute(self.claim, params).rowcount != 1:
            return None
        return connection.execute(self.read, params).one()


_REPORTS_C = REPORT_MAILS.c
_REPORT_CLAIM = (
    update(REPORT_MAILS)
    .where(
        _REPORTS_C.report_id == bindparam("entry"),
        or_(
            and_(_REPORTS_C.status == "pending", _REPORTS_C.next_attempt_at <= bindparam("now")),
            and_(_REPORTS_C.status == "sending", _REPORTS_C.lease_until < bindparam("now")),
        ),
    )
    .values(status="sending", attempts=_REPORTS_C.attempts + 1, lease_until=bindparam("lease"))
)
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
    lease = now + timedelta(seconds=timing.lease_seconds)
    params = {"entry": report_id, "now": now, "lease": lease}
    if session.connection().execute(_REPORT_CLAIM, params).rowcount != 1:
        return None
    return session.execute(_REPORT_READ, {"entry": report_id}).one()


def _finishing(box: Box = COPIES, **values: object) -> Update:
    """sending → another state, for the entry bound as `entry` under the claim whose lease
    is bound as `lease`; the lease ends. A worker whose lease ran out, and whose entry another
    worker has claimed since, changes nothing: its late outcome (a retry, say) must not undo
    the other's (sent). The lease is the claim's own: attempts would not tell the claims apart
    once an operator's retry has set them back to 0."""
    c = box.table.c
    return (
        update(box.table)
        .where(
            box.key_column == bindparam("entry"),
            c.status == "sending",
            c.lease_until == bindparam("lease"),
        )
        .values(lease_until=None, **values)
    )


_SENT = {  # built once
    box.key: _finishing(box, status="sent", sent_at=bindparam("now"), last_error=None)
    for box in (COPIES, REPORTS)
}


def _finish(
    session: Session, application_id: int, lease: datetime, box: Box = COPIES, **values: object
) -> bool:
    return _run(session, _finishing(box, **values), {"entry": application_id, "lease": lease})


def _run(session: Session, statement: Update, params: dict[str, Any]) -> bool:
    return int(session.connection().execute(statement, params).rowcount) == 1


def mark_sent(
    session: Session, application_id: int, *, now: datetime, lease: datetime, box: Box = COPIES
) -> bool:
    params = {"entry": application_id, "now": now, "lease": lease}
    return _run(session, _SENT[box.key], params)


def mark_failed(
    session: Session, application_id: int, error: str, *, lease: datetime, box: Box = COPIES
) -> bool:
    return _finish(session, application_id, lease, box, status="failed", last_error=error[:2000])


def backoff(attempts: int, timing: Timing, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter over the upper half: base * 2^(n-1) * [0.5, 1]."""
    delay = timing.retry_base_seconds * 2 ** max(attempts - 1, 0)
    jitter: float = (rng or random).random()
    return float(min(delay, 6 * 3600) * (0.5 + 0.5 * jitter))


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
    grace = now - timedelta(seconds=timing.sweep_grace_seconds)
    c, key = box.table.c, box.key_column
    stale = or_(c.enqueued_at.is_(None), c.enqueued_at < grace)
    unswept = or_(stale, c.enqueued_at < c.lease_until)  # since it ran out
    due = or_(
        and_(c.status == "pending", c.next_attempt_at <= now, stale),
        and_(c.status == "sending", c.lease_until < now, unswept),
    )
    # One statement: a sweep overlapping another waits on its row locks, then finds those
    # rows no longer due (just enqueued) and leaves them alone.
    batch = select(key).where(due).order_by(c.next_attempt_at).limit(limit)
    marked = session.scalars(
        update(box.table)
        .where(due, key.in_(batch.scalar_subquery()))
        .values(enqueued_at=now)
        .returning(key)
    )
    return sorted(marked)


def retry_failed(session: Session, application_id: int | None, *, now: datetime) -> list[int]:
    """Operators: failed entries (one, or all) back to pending, due now, with the whole of
    retry_hours from now for their retries (a relay that greylists the first attempt must not
    fail them again at once). One statement, so an entry a worker or another retry has taken
    meanwhile (no longer failed) is left as it is."""
    failed = OutboxEntry.status == "failed"
    if application_id is not None:
        failed = failed & (OutboxEntry.application_id == application_id)
    retried = session.scalars(
        update(OutboxEntry)
        .where(failed)
        .values(status="pending", next_attempt_at=now, enqueued_at=now, attempts=0, retry_from=now)
        .returning(OutboxEntry.application_id)
        .execution_options(synchronize_session=False)
    )
    return sorted(retried)


def counts(session: Session, box: Box = COPIES) -> dict[str, int]:
    status = box.table.c.status
    rows = session.execute(select(status, func.count()).group_by(status))
    found = {status: int(n) for status, n in rows}
    return {s: found.get(s, 0) for s in ("pending", "sending", "sent", "failed")}


def oldest_pending_age(session: Session, *, now: datetime) -> float:
    """Seconds since the oldest undelivered application arrived (0 when none is waiting)."""
    oldest = session.scalar(
        select(func.min(Application.received_at))
        .join(OutboxEntry)
        .where(OutboxEntry.status.in_(("pending", "sending")))
    )
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # min() bypasses the column type on SQLite
        from datetime import UTC

        oldest = oldest.replace(tzinfo=UTC)
    return max((now - oldest).total_seconds(), 0.0)
