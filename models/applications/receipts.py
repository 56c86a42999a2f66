"""The applicant's receipt and the application's status page (C20).

A receipt is queued with its application, in the same transaction, after the employer's
copy, and is the outbox's fourth kind (`outbox.RECEIPTS`): claimed, leased, retried and
swept as the copies are (C8), in a row and a task of its own, so it never holds a copy up.
What it says is read at the claim, from the application's snapshot (C8): the job's title,
the employer's name unless the job was confidential, never the employer's address.

Its link's token is made at the claim, kept as its SHA-256 only, and flushed before the send
(as an alert's, C19), so the database alone opens no status page. Each claim makes a new
token: a receipt sent again in C8's one window (a crash after the relay's 250) carries the
link that works, the earlier one's no longer does.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, delete, exists, func, select, update
from sqlalchemy.orm import Session

from models.applications import outbox
from models.db import leases
from models.db.entities import Application, OutboxEntry, Receipt
from models.webhooks.tables import DELIVERIES, MESSAGES

R = outbox.RECEIPT_MAILS.c
LANGUAGES = ("en", "fr")
# What the status page says (C20), in this order of precedence.
STATES = ("erased", "delivered", "accepted", "undeliverable", "received")
CANCELLED_BECAUSE = "cancelled: the application was erased"
_CLAIM = leases.claiming(outbox.RECEIPTS)
_READ = (
    select(
        R.id,
        R.attempts,
        R.retry_from,
        R.lease_until,
        R.created_at,
        R.language,
        R.confidential,
        R.application_id,
        Application.job_id,
        Application.job_title,
        Application.employer_name,
        Application.email,
        Application.received_at,
    )
    .outerjoin(Application, Application.id == R.application_id)
    .where(R.id == bindparam("entry"))
)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def queue(session: Session, application: Application, *, language: str, confidential: bool) -> int:
    """The receipt of a stored application, pending in its transaction and counted as
    enqueued now (the after-commit enqueue follows; else the sweeper's grace)."""
    now = application.received_at
    receipt = Receipt(
        application_id=application.id,
        language=language if language in LANGUAGES else "en",
        confidential=confidential,
        created_at=now,
        status="pending",
        attempts=0,
        next_attempt_at=now,
        enqueued_at=now,
    )
    session.add(receipt)
    session.flush()
    return receipt.id


@dataclass(frozen=True)
class Claimed:
    """A claimed receipt: its row (the outbox's claim columns and the application's
    snapshot), and the token its link carries (None: the application is gone)."""

    row: Row[Any]
    token: str | None


def claim(
    session: Session, receipt_id: int, *, now: datetime, timing: outbox.Timing
) -> Claimed | None:
    """The claim of C8 on a receipt, then what it says and a new token for its link (in the
    caller's transaction: commit it before sending). None if not won."""
    params = {"entry": receipt_id, "now": now, "lease": timing.lease_from(now)}
    if leases.changed(session, _CLAIM, params) != 1:
        return None
    row = session.execute(_READ, {"entry": receipt_id}).one()
    if row.application_id is None:
        return Claimed(row, None)
    token = secrets.token_urlsafe(24)
    session.execute(update(Receipt).where(Receipt.id == receipt_id).values(digest=digest(token)))
    return Claimed(row, token)


@dataclass(frozen=True)
class Status:
    """What the status page shows (C20): one of STATES, and the job as the receipt names it
    (`employer` None when the job is confidential); the rest None once erased."""

    state: str
    language: str
    job_id: int | None = None
    job_title: str | None = None
    employer: str | None = None
    received_at: datetime | None = None
    delivered_at: datetime | None = None


def _accepted(application_id: Any) -> Any:
    """The employer's system accepted the application: a delivery of its
    `application.received` succeeded (C12)."""
    d, m = DELIVERIES.c, MESSAGES.c
    return exists(
        select(d.id)
        .join(MESSAGES, m.id == d.message_pk)
        .where(
            m.application_id == application_id,
            m.type == "application.received",
            d.status == "succeeded",
        )
    )


def status(session: Session, token: str) -> Status | None:
    """The application of a status page's token as it is now; None for a token no receipt
    carries."""
    row = session.execute(
        select(
            Receipt.language,
            Receipt.erased_at,
            Receipt.confidential,
            Application.id,
            Application.job_id,
            Application.job_title,
            Application.employer_name,
            Application.received_at,
            OutboxEntry.status,
            OutboxEntry.sent_at,
            _accepted(Application.id).label("accepted"),
        )
        .outerjoin(Application, Application.id == Receipt.application_id)
        .outerjoin(OutboxEntry, OutboxEntry.application_id == Application.id)
        .where(Receipt.digest == digest(token))
    ).one_or_none()
    if row is None:
        return None
    if row.id is None:  # erased, or purged after the retention (C8)
        return Status("erased", row.language)
    if row.status == "sent":
        state = "delivered"
    elif row.accepted:
        state = "accepted"
    elif row.status in ("failed", "undeliverable"):  # C22: a bounce after the send too
        state = "undeliverable"
    else:
        state = "received"
    return Status(
        state,
        row.language,
        row.job_id,
        row.job_title,
        None if row.confidential else row.employer_name,
        row.received_at,
        row.sent_at if state == "delivered" else None,
    )


def application_of(session: Session, token: str) -> int | None:
    """The application a status page's token names, locked (PostgreSQL) for its erasure;
    None for an unknown token or one whose application is gone."""
    return session.scalar(
        select(Receipt.application_id)
        .where(Receipt.digest == digest(token), Receipt.application_id.is_not(None))
        .with_for_update()
    )


def known(session: Session, token: str) -> bool:
    return session.scalar(select(Receipt.id).where(Receipt.digest == digest(token))) is not None


def forget(session: Session, application_ids: list[int], *, now: datetime) -> int:
    """Part of an erasure (C13): these applications' receipts are marked erased, and one not
    yet sent is cancelled (failed), so neither a worker, the sweeper nor a retry sends it;
    a send under way finds its lease gone and changes nothing. Returns the receipts."""
    if not application_ids:
        return 0
    mine = Receipt.application_id.in_(application_ids)
    session.execute(
        update(Receipt)
        .where(mine, Receipt.status.in_(("pending", "sending")))
        .values(status="failed", lease_until=None, last_error=CANCELLED_BECAUSE)
        .execution_options(synchronize_session=False)
    )
    done = session.execute(
        update(Receipt)
        .where(mine)
        .values(erased_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(done.rowcount)  # type: ignore[attr-defined]


def counts(session: Session) -> dict[str, int]:
    """Receipts by status, every status named (0 for none), for the metrics."""
    return outbox.counts(session, outbox.RECEIPTS)


def purge_erased(session: Session, *, cutoff: datetime) -> int:
    """Receipts whose application went (erased, or purged) before `cutoff`, the retention
    (C8): their link then says no more than an unknown one."""
    gone_at = func.coalesce(Receipt.erased_at, Receipt.created_at)
    done = session.execute(
        delete(Receipt).where(Receipt.application_id.is_(None), gone_at < cutoff)
    )
    return int(done.rowcount)  # type: ignore[attr-defined]
