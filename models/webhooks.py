"""PROVISIONAL (branch `hooks` owns this module and replaces it on merge): events written as
a message and its deliveries, in the caller's transaction (C12)."""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import and_, insert, literal, or_, select
from sqlalchemy.orm import Session

from models.webhook_tables import DELIVERIES, ENDPOINTS, MESSAGES

D, E, M = DELIVERIES.c, ENDPOINTS.c, MESSAGES.c
TEST = "webhook.test"


def subscribes(events_json: str, type: str) -> bool:
    events = json.loads(events_json)
    return events == ["*"] or type in events


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _body(type: str, data: Any, now: datetime) -> str:
    return json.dumps({"type": type, "timestamp": _stamp(now), "data": data})


def emit_batch(
    session: Session, type: str, events: list[tuple[int, Any]], *, now: datetime
) -> list[str]:
    """One message per event and one delivery per enabled endpoint of its employer that
    subscribes to `type`: two statements whatever the number of events."""
    if not events:
        return []
    ids = [f"msg_{secrets.token_urlsafe(18)}" for _ in events]
    session.execute(
        insert(MESSAGES),
        [
            {
                "message_id": i,
                "employer_id": employer,
                "type": type,
                "payload": _body(type, data, now),
                "created_at": now,
            }
            for i, (employer, data) in zip(ids, events, strict=True)
        ],
    )
    wanted = or_(E.events == '["*"]', E.events.like(f'%"{type}"%'))
    chosen = (
        select(
            M.id,
            E.id,
            literal("pending"),
            literal(0),
            literal(0),
            literal(now, D.due_at.type),
            literal(now, D.created_at.type),
        )
        .join(ENDPOINTS, and_(E.employer_id == M.employer_id, E.status == "enabled", wanted))
        .where(M.message_id.in_(ids))
    )
    session.execute(
        insert(DELIVERIES).from_select(
            ["message_pk", "endpoint_id", "status", "attempts", "step", "due_at", "created_at"],
            chosen,
        )
    )
    return ids


def emit(
    session: Session,
    employer_id: int,
    type: str,
    data: Any,
    *,
    endpoint_id: int | None = None,
    now: datetime,
) -> str:
    """One event; `webhook.test` goes to `endpoint_id` only, whatever its events."""
    message_id = f"msg_{secrets.token_urlsafe(18)}"
    session.execute(
        insert(MESSAGES).values(
            message_id=message_id,
            employer_id=employer_id,
            type=type,
            payload=_body(type, data, now),
            created_at=now,
        )
    )
    target = and_(E.employer_id == employer_id, E.status == "enabled")
    if endpoint_id is not None:
        target = and_(target, E.id == endpoint_id)
    else:
        target = and_(target, or_(E.events == '["*"]', E.events.like(f'%"{type}"%')))
    chosen = select(
        select(M.id).where(M.message_id == message_id).scalar_subquery(),
        E.id,
        literal("pending"),
        literal(0),
        literal(0),
        literal(now, D.due_at.type),
        literal(now, D.created_at.type),
    ).where(target)
    session.execute(
        insert(DELIVERIES).from_select(
            ["message_pk", "endpoint_id", "status", "attempts", "step", "due_at", "created_at"],
            chosen,
        )
    )
    return message_id


def pending_of(session: Session, message_ids: list[str]) -> list[int]:
    """The deliveries just written for these messages, to enqueue after commit."""
    if not message_ids:
        return []
    mine = select(M.id).where(M.message_id.in_(message_ids)).scalar_subquery()
    return list(session.scalars(select(D.id).where(D.message_pk.in_(mine), D.status == "pending")))
