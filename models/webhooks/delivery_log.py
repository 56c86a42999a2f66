"""An endpoint's delivery log (C12): its deliveries newest first, and a failed one sent again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, select, update
from sqlalchemy.orm import Session

from models.core.errors import (
    DeliveryNotFailed,
    NotFound,
)
from models.webhooks.messages import D, M
from models.webhooks.tables import DELIVERIES, MESSAGES


@dataclass(frozen=True)
class DeliveryRow:
    message_id: str
    event: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class DeliveryPage:
    deliveries: list[DeliveryRow]
    total: int


def list_deliveries(
    session: Session, endpoint_id: int, *, status: str | None, limit: int, offset: int
) -> DeliveryPage:
    """An endpoint's deliveries, newest first (C12)."""
    which = [D.endpoint_id == endpoint_id]
    if status is not None:
        which.append(D.status == status)
    total = session.execute(select(func.count()).select_from(DELIVERIES).where(*which))
    rows = session.execute(
        select(
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
        .where(*which)
        .order_by(D.created_at.desc(), D.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return DeliveryPage([DeliveryRow(*row) for row in rows], total.scalar_one())


def retry_delivery(session: Session, endpoint_id: int, message_id: str, *, now: datetime) -> int:
    """Send a failed delivery again with the whole schedule anew, `attempts` going on
    counting (C12): one conditional UPDATE, so a delivery that stopped being failed in the
    meantime is a 409, never a second sending. Returns the delivery id to enqueue, marked
    enqueued (as `models.webhooks.messages.pending_of` marks a new one's)."""
    mine = and_(
        D.endpoint_id == endpoint_id,
        D.message_pk == select(M.id).where(M.message_id == message_id).scalar_subquery(),
    )
    retried: int | None = session.execute(
        update(DELIVERIES)
        .where(mine, D.status == "failed")
        .values(status="pending", step=0, due_at=now, lease_until=now, finished_at=None)
        .returning(D.id)
    ).scalar_one_or_none()
    if retried is not None:
        return retried
    if session.execute(select(D.status).where(mine)).first() is None:
        raise NotFound(f"Webhook {endpoint_id} has no delivery of message {message_id}.")
    raise DeliveryNotFailed(
        f"The delivery of {message_id} has not failed; only a failed one is retried."
    )
