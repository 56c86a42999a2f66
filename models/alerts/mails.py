"""The emails of job alerts (C19), the outbox's third kind (`outbox.ALERTS`): claimed,
leased, retried and swept as the application copies are (C8).

A mail names its alert and its kind (`confirm`, `digest`); what it says is read at the
claim, as the alert is then (an alert unsubscribed or confirmed since gets no confirmation
email, one unsubscribed since gets no digest). The token of
its link is made at the claim too, kept as its digest only, and committed before the send,
so a link that leaves in an email always works.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, func, select
from sqlalchemy.orm import Session

from models.alerts import subscriptions as alerts
from models.applications import outbox
from models.db import leases
from models.db.entities import AlertMail, AlertSubscription

A = outbox.ALERT_MAILS.c
# Each kind's link (a token of this purpose), and the one state of the alert it is sent in:
# a confirmation to a pending alert, a digest to a confirmed one (never an unsubscribed).
PURPOSES = {"confirm": "confirm", "digest": "manage"}
KINDS = tuple(PURPOSES)
SENT_TO = {"confirm": "pending", "digest": "confirmed"}
_CLAIM = leases.claiming(outbox.ALERTS)
_READ = (
    select(
        A.id,
        A.kind,
        A.attempts,
        A.retry_from,
        A.lease_until,
        A.created_at,
        A.opened_from,
        A.opened_until,
        AlertSubscription.id.label("subscription_id"),
        AlertSubscription.email,
        AlertSubscription.language,
        AlertSubscription.filters,
        AlertSubscription.state,
    )
    .join(AlertSubscription, AlertSubscription.id == A.subscription_id)
    .where(A.id == bindparam("entry"))
)


def queue_confirmation(session: Session, subscription: AlertSubscription, *, now: datetime) -> int:
    """The confirmation email of a sign-up, pending in the sign-up's transaction."""
    mail = AlertMail(
        subscription_id=subscription.id,
        kind="confirm",
        created_at=now,
        status="pending",
        attempts=0,
        next_attempt_at=now,
    )
    session.add(mail)
    session.flush()
    return mail.id


@dataclass(frozen=True)
class Claimed:
    """A claimed alert email: its row (outbox's claim columns and the alert's) and the token
    its link carries (the confirmation's, or a digest's manage link), None when there is
    nothing to send (the alert moved on)."""

    row: Row[Any]
    token: str | None


def claim(
    session: Session, mail_id: int, *, now: datetime, timing: outbox.Timing
) -> Claimed | None:
    """The claim of C8 on an alert's email, then its alert as it is now and a new token for
    its link (in the caller's transaction: commit it before sending). None if not won."""
    params = {"entry": mail_id, "now": now, "lease": timing.lease_from(now)}
    if leases.changed(session, _CLAIM, params) != 1:
        return None
    row = session.execute(_READ, {"entry": mail_id}).one()
    purpose = PURPOSES.get(row.kind)
    if purpose is None or row.state != SENT_TO[row.kind]:
        return Claimed(row, None)
    subscription = session.get_one(AlertSubscription, row.subscription_id)
    token = alerts.issue(session, subscription, purpose, now)
    session.flush()  # written now: on PostgreSQL's autocommit steps, committed before the send
    return Claimed(row, token)


def counts(session: Session) -> dict[tuple[str, str], int]:
    """Alert emails by kind and status, every pair named (0 for none), for the metrics."""
    rows = session.execute(select(A.kind, A.status, func.count()).group_by(A.kind, A.status))
    found = {(kind, status): int(n) for kind, status, n in rows}
    return {(k, s): found.get((k, s), 0) for k in KINDS for s in outbox.STATUSES}
