"""Webhook events as messages (C12): one message per event, its body stored exactly as
sent, and one delivery per enabled endpoint of the employer that subscribes to its type.

Both are written in the caller's transaction so an event exists exactly when its cause
does. The caller enqueues the deliveries after commit (`pending_of`, which marks them
enqueued, and `models.db.unit_of_work.after_commit`); those of no caller's (the upkeep's, a
sync's) wait for the sweeper."""

from __future__ import annotations

import json
import secrets
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from models.core.dates import timestamp
from models.webhooks.tables import DELIVERIES, ENDPOINTS, MESSAGES

D, E, M = DELIVERIES.c, ENDPOINTS.c, MESSAGES.c


TEST = "webhook.test"


# The event types an endpoint may subscribe to (C12); "*" alone means all of them.
EVENT_TYPES = (
    "application.received",
    "application.undeliverable",
    "employer.address_flagged",
    "job.created",
    "job.deleted",
    "job.expired",
    "job.expiring",
    "job.refreshed",
    "job.taken_down",
    "job.updated",
    "sync.completed",
    TEST,
)


ALL = "*"


DELIVERY_STATUSES = ("pending", "sending", "succeeded", "failed", "cancelled")


def _plain(value: Any) -> Any:
    """What orjson is not to guess: datetimes in the service's format, dates as YYYY-MM-DD,
    amounts as numbers (C4)."""
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def body(type: str, data: Any, now: datetime) -> str:
    """The message body exactly as sent, on every attempt and to every endpoint."""
    message = {"type": type, "timestamp": timestamp(now), "data": data}
    return orjson.dumps(message, default=_plain, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()


def new_message_id() -> str:
    return f"msg_{secrets.token_urlsafe(18)}"


def subscribes(events_json: str, type: str) -> bool:
    """Whether an endpoint's `events` take `type`. `webhook.test` goes only to the endpoint
    tested (emit's `endpoint_id`), whatever its events."""
    events = json.loads(events_json)
    return events == [ALL] or type in events


def subscribed(type: str) -> ColumnElement[bool]:
    """`subscribes` in SQL. Events are stored as written by `events_json` (validated types,
    JSON-quoted), so the quoted type found in the text is the type in the list."""
    return or_(E.events == events_json([ALL]), E.events.contains(f'"{type}"', autoescape=True))


def events_json(events: list[str]) -> str:
    return json.dumps(events, separators=(",", ":"))


DELIVERY_COLUMNS = [
    "message_pk",
    "endpoint_id",
    "status",
    "attempts",
    "step",
    "due_at",
    "created_at",
]


def emit_batch(
    session: Session,
    type: str,
    events: list[tuple[int, Any]],
    *,
    now: datetime,
    message_ids: list[str] | None = None,
    application_ids: list[int | None] | None = None,
    listening: set[int] | None = None,
) -> list[str]:
    """Many events of one type, in three statements whatever their number: find the employers
    with an endpoint that takes `type`, write their messages (one executemany), then every
    delivery (one INSERT … SELECT). An event no endpoint takes writes nothing. Returns the
    ids of the messages written, in the order of `events`. `message_ids`, one per event,
    replaces the random ids: the daily `job.expiring` scan's ids say what it emitted.
    `application_ids`, one per event, names the application each carries (C13's erasure).
    `listening`, the employers known to listen, spares the first statement."""
    if not events:
        return []
    if listening is None:
        employers = {employer for employer, _ in events}
        listening = set(
            session.scalars(
                select(E.employer_id)
                .where(E.employer_id.in_(employers), E.status == "enabled", subscribed(type))
                .distinct()
            )
        )
    given = message_ids or [new_message_id() for _ in events]
    subjects = application_ids or [None] * len(events)
    rows: list[dict[str, Any]] = [
        {
            "message_id": message_id,
            "employer_id": employer,
            "type": type,
            "payload": body(type, data, now),
            "created_at": now,
            "application_id": subject,
        }
        for message_id, (employer, data), subject in zip(given, events, subjects, strict=True)
        if employer in listening
    ]
    if not rows:
        return []
    ids: list[str] = [row["message_id"] for row in rows]
    session.execute(insert(MESSAGES), rows)
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
        .join(ENDPOINTS, and_(E.employer_id == M.employer_id, E.status == "enabled"))
        .where(M.message_id.in_(ids), subscribed(type))
    )
    session.execute(insert(DELIVERIES).from_select(DELIVERY_COLUMNS, chosen))
    return ids


def emit(
    session: Session,
    employer_id: int,
    type: str,
    data: Any,
    *,
    endpoint_id: int | None = None,
    application_id: int | None = None,
    now: datetime,
) -> str:
    """One event of `employer_id`; with `endpoint_id` (`webhook.test`), to that enabled
    endpoint of the employer only, whatever its events. Returns the message id; when no
    endpoint is to receive the event nothing is written and the id names no message."""
    if endpoint_id is None:
        subject = [application_id]
        events = [(employer_id, data)]
        written_ids = emit_batch(session, type, events, now=now, application_ids=subject)
        [written] = written_ids or [new_message_id()]
        return written
    message_id = new_message_id()
    target = and_(E.id == endpoint_id, E.employer_id == employer_id, E.status == "enabled")
    values = {
        "message_id": message_id,
        "employer_id": employer_id,
        "type": type,
        "payload": body(type, data, now),
        "created_at": now,
    }
    if session.execute(select(E.id).where(target)).first() is None:
        return message_id
    session.execute(insert(MESSAGES).values(values))
    chosen = select(
        select(M.id).where(M.message_id == message_id).scalar_subquery(),
        E.id,
        literal("pending"),
        literal(0),
        literal(0),
        literal(now, D.due_at.type),
        literal(now, D.created_at.type),
    ).where(target)
    session.execute(insert(DELIVERIES).from_select(DELIVERY_COLUMNS, chosen))
    return message_id


def pending_of(session: Session, message_ids: list[str], *, now: datetime) -> list[int]:
    """The pending deliveries of these messages, marked enqueued at `now`: the caller enqueues
    them once they are committed, so no hand-on (`models.webhooks.delivery.next_waiting`)
    sends them again, and the sweeper leaves them to the broker for its grace."""
    if not message_ids:
        return []
    mine = select(M.id).where(M.message_id.in_(message_ids)).scalar_subquery()
    marked = (
        update(DELIVERIES)
        .where(D.message_pk.in_(mine), D.status == "pending")
        .values(lease_until=now)
        .returning(D.id)
    )
    return sorted(session.scalars(marked))
