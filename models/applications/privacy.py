"""Erasure and export of an applicant's data (C13 Privacy: PIPEDA and Quebec's Law 25).

Erasing an application reaches every copy of it the service holds: the row and its résumé,
its email copy (the outbox entry, deleted with it, so a pending copy is never sent), the
Idempotency-Key record of its submission, its receipt (cancelled if not sent; its link then
says the application was erased, C20), and the payload of its `application.received`
event, scrubbed to `{"id", "erased": true}`, whose deliveries that have not succeeded are
cancelled. What has already left cannot be recalled: a copy or a delivery a worker claimed
before the erasure may finish its send (its late outcome then changes no row).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.orm import Session

from models import idempotency, reports
from models.alerts import subscriptions as alerts
from models.applications import receipts
from models.applications import service as applications
from models.core import checks
from models.db.entities import (
    AlertSubscription,
    Application,
    Employer,
    JobReport,
    OutboxEntry,
    Resume,
)
from models.webhooks.delivery_log import DeliveryRow
from models.webhooks.tables import DELIVERIES, MESSAGES

D, M = DELIVERIES.c, MESSAGES.c
RECEIVED = "application.received"
CANCELLED_BECAUSE = "cancelled: the application was erased"


@dataclass(frozen=True)
class Erased:
    """How many of each were erased (C14's counts of `jobpost applications erase`)."""

    applications: int = 0
    resumes: int = 0
    deliveries: int = 0  # email copies deleted, and webhook deliveries scrubbed
    reports: int = 0  # fraud reports whose reporter's address was removed
    alerts: int = 0  # job alerts deleted, in any state (C19)

    def as_dict(self) -> dict[str, int]:
        return {
            "applications": self.applications,
            "resumes": self.resumes,
            "deliveries": self.deliveries,
            "reports": self.reports,
            "alerts": self.alerts,
        }


def address(value: str) -> str:
    """An address to look up, checked as C8 checks an applicant's; Invalid otherwise."""
    return checks.email(value, "email", max_len=applications.MAX_EMAIL)


def _same_address(column: Any, email: str) -> ColumnElement[bool]:
    """Case-insensitive: SQL's lower() on both sides (SQLite folds ASCII letters only)."""
    return func.lower(column) == func.lower(email)


def erase(session: Session, application_ids: list[int], *, now: datetime) -> Erased:
    """Erase these applications and every copy of them (the module's docstring), in the
    caller's transaction."""
    if not application_ids:
        return Erased()
    mine = Application.id.in_(application_ids)
    # Locked first (PostgreSQL), so a worker's claim of a copy either committed before
    # (its send goes on) or waits and then finds no entry to claim.
    found = list(
        session.scalars(select(Application.id).where(mine).with_for_update(of=Application))
    )
    resumes_held = session.scalar(
        select(func.count()).select_from(Resume).where(Resume.application_id.in_(found))
    )
    copies = session.scalar(
        select(func.count()).select_from(OutboxEntry).where(OutboxEntry.application_id.in_(found))
    )
    scrubbed = _scrub_events(session, found, now=now)
    idempotency.erase(session, found)
    receipts.forget(session, found, now=now)  # C20: its link says it was erased
    # Résumé and outbox entry go with it: ON DELETE CASCADE (foreign keys are on in SQLite).
    session.execute(delete(Application).where(Application.id.in_(found)))
    return Erased(len(found), int(resumes_held or 0), int(copies or 0) + scrubbed)


def _scrub_events(session: Session, application_ids: list[int], *, now: datetime) -> int:
    """`application.received` of these applications: the data becomes `{"id", "erased":
    true}` (type and timestamp kept), and every delivery not succeeded is cancelled, so
    neither the sweeper, a retry nor an operator sends it. A delivery being sent is
    cancelled too: its worker's outcome then matches no row (models.webhooks.delivery).
    Returns the deliveries of these events."""
    events = session.execute(
        select(M.id, M.application_id, M.payload).where(
            M.application_id.in_(application_ids), M.type == RECEIVED
        )
    ).all()
    if not events:
        return 0
    for pk, application_id, payload in events:
        message = orjson.loads(payload)
        message["data"] = {"id": application_id, "erased": True}
        session.execute(
            update(MESSAGES).where(M.id == pk).values(payload=orjson.dumps(message).decode())
        )
    pks = [pk for pk, _, _ in events]
    session.execute(
        update(DELIVERIES)
        .where(D.message_pk.in_(pks), D.status.not_in(("succeeded", "cancelled")))
        .values(
            status="cancelled",
            lease_until=None,
            due_at=None,
            last_error=CANCELLED_BECAUSE,
            finished_at=now,
        )
    )
    held = session.scalar(select(func.count()).select_from(DELIVERIES).where(D.message_pk.in_(pks)))
    return int(held or 0)


def erase_one(session: Session, employer: Employer, application_id: int, *, now: datetime) -> None:
    """The employer's erasure (DELETE /applications/{id}): another employer's application,
    an unknown or an erased one is NotFound (404)."""
    applications.get(session, employer, application_id)
    erase(session, [application_id], now=now)


def _of_address(session: Session, email: str) -> list[int]:
    return list(
        session.scalars(
            select(Application.id)
            .where(_same_address(Application.email, email))
            .order_by(Application.id)
        )
    )


def erase_address(session: Session, email: str, *, now: datetime) -> Erased:
    """Everything held for an address (an applicant's request): its applications as
    `erase` does, its address removed from the fraud reports it made, and its job alerts
    deleted with their tokens (C19). The reports stay, without it: they are the operator's
    record of what was reported about a job (C13)."""
    erased = erase(session, _of_address(session, email), now=now)
    cleared = session.execute(
        update(JobReport)
        .where(_same_address(JobReport.email, email))
        .values(email=None)
        .execution_options(synchronize_session=False)
    )
    return Erased(
        erased.applications,
        erased.resumes,
        erased.deliveries,
        int(cleared.rowcount),  # type: ignore[attr-defined]
        alerts.erase_address(session, email),
    )


@dataclass(frozen=True)
class ReceivedDelivery:
    """A delivery of an application's `application.received`: the endpoint's log entry."""

    application_id: int
    endpoint_id: int
    delivery: DeliveryRow


@dataclass(frozen=True)
class Export:
    """Everything held for an address (C13): its applications with their outbox entries,
    the deliveries of their `application.received` events, the fraud reports it made and
    its job alerts (C19). api.representations.export is its JSON (C14)."""

    email: str
    applications: list[Application]
    webhook_deliveries: list[ReceivedDelivery]
    reports: list[reports.Shown]
    alerts: list[AlertSubscription]


def export(session: Session, email: str) -> Export:
    """What `jobpost applications export` prints, read in the caller's session."""
    ids = _of_address(session, email)
    found = list(
        session.scalars(
            select(Application).where(Application.id.in_(ids)).order_by(Application.id)
        ).unique()
    )
    rows = session.execute(
        select(
            M.application_id,
            D.endpoint_id,
            M.message_id,
            M.type,
            D.status,
            D.attempts,
            D.last_status_code,
            D.last_error,
            D.created_at,
            D.delivered_at,
        )
        .join(MESSAGES, M.id == D.message_pk)
        .where(M.application_id.in_(ids), M.type == RECEIVED)
        .order_by(M.application_id, D.id)
    )
    sent = [
        ReceivedDelivery(
            r.application_id,
            r.endpoint_id,
            DeliveryRow(
                r.message_id,
                r.type,
                r.status,
                r.attempts,
                r.last_status_code,
                r.last_error,
                r.created_at,
                r.delivered_at,
            ),
        )
        for r in rows
    ]
    made = session.scalars(
        select(JobReport).where(_same_address(JobReport.email, email)).order_by(JobReport.id)
    )
    shown = [reports.shown(r) for r in made]
    return Export(email, found, sent, shown, alerts.of_address(session, email))


def erase_by_link(session: Session, token: str, *, now: datetime) -> bool:
    """The applicant's own erasure, from the status page of its receipt (C20): `erase` of
    the application the token names. False for a token that names none (unknown, or its
    application erased already)."""
    application_id = receipts.application_of(session, token)
    if application_id is None:
        return False
    erase(session, [application_id], now=now)
    return True
