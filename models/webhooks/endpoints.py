"""Webhook events and endpoints (C12): the rules, and the writes the API and workers share.

An event is one message (one `msg_…` id, its body stored exactly as sent) and one delivery
per enabled endpoint of the employer that subscribes to its type, written in the caller's
transaction so an event exists exactly when its cause does. The caller enqueues the
deliveries after commit (`pending_of`, `models.db.unit_of_work.after_commit`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, delete, func, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from models.core import checks
from models.core.errors import (
    DeliveryNotFailed,
    FieldError,
    NotFound,
    ValidationFailed,
    WebhookDisabled,
)
from models.db.entities import Employer, WebhookEndpoint
from models.webhooks.secrets import KeySource, MissingKey, encrypt, load_key, new_secret
from models.webhooks.tables import DELIVERIES, ENDPOINTS, MESSAGES
from models.webhooks.urls import PortRanges, Resolve, check_url, resolve

D, E, M = DELIVERIES.c, ENDPOINTS.c, MESSAGES.c

TEST = "webhook.test"
# The event types an endpoint may subscribe to (C12); "*" alone means all of them.
EVENT_TYPES = (
    "application.received",
    "job.expired",
    "job.expiring",
    "job.refreshed",
    "job.taken_down",
    "sync.completed",
    TEST,
)
ALL = "*"
DELIVERY_STATUSES = ("pending", "sending", "succeeded", "failed", "cancelled")


def timestamp(moment: datetime) -> str:
    """The service's timestamp: UTC, milliseconds, `Z` (C12's message and delivery log)."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


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


def _subscribed(type: str) -> ColumnElement[bool]:
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
) -> list[str]:
    """Many events of one type, in three statements whatever their number: find the employers
    with an endpoint that takes `type`, write their messages (one executemany), then every
    delivery (one INSERT … SELECT). An event no endpoint takes writes nothing. Returns the
    ids of the messages written, in the order of `events`. `message_ids`, one per event,
    replaces the random ids: the daily `job.expiring` scan's ids say what it emitted.
    `application_ids`, one per event, names the application each carries (C13's erasure)."""
    if not events:
        return []
    employers = {employer for employer, _ in events}
    listening = set(
        session.scalars(
            select(E.employer_id)
            .where(E.employer_id.in_(employers), E.status == "enabled", _subscribed(type))
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
        .where(M.message_id.in_(ids), _subscribed(type))
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


def pending_of(session: Session, message_ids: list[str]) -> list[int]:
    """The pending deliveries of these messages: what to enqueue once they are committed."""
    if not message_ids:
        return []
    mine = select(M.id).where(M.message_id.in_(message_ids)).scalar_subquery()
    found = session.scalars(select(D.id).where(D.message_pk.in_(mine), D.status == "pending"))
    return list(found)


# ------------------------------------------------------------------ endpoints (the API's side)

MAX_ENDPOINTS = 10  # per employer (C12)
MAX_DESCRIPTION = 200
ROTATION_OVERLAP = timedelta(hours=24)  # the previous secret still signs this long (C12)
ENDPOINT_STATUSES = ("enabled", "disabled")


@dataclass(frozen=True)
class UrlPolicy:
    """How URLs are judged on write: the settings of C12, and the resolver seam."""

    allow_http: bool = False
    allow_private: bool = False
    resolve: Resolve = resolve
    allowed_ports: PortRanges = ()  # WEBHOOK_ALLOWED_PORTS: beyond the web ports


@dataclass(frozen=True)
class EndpointWrite:
    """What a valid POST or PUT body writes; a member left None on a PUT is left as it is
    (`description` is written when `has_description`, so a null clears it)."""

    url: str | None = None
    events: list[str] | None = None
    description: str | None = None
    has_description: bool = False
    status: str | None = None


def _events(value: Any, errors: list[FieldError]) -> list[str] | None:
    if not isinstance(value, list):
        errors.append(FieldError("events", "invalid_type", "events must be an array."))
        return None
    if not value:
        errors.append(FieldError("events", "too_few", "events needs at least one event type."))
        return None
    found: list[str] = []
    shown = ", ".join(EVENT_TYPES)
    for i, item in enumerate(value):
        field = f"events[{i}]"
        if not isinstance(item, str):
            errors.append(FieldError(field, "invalid_type", f"{field} must be a string."))
        elif item == ALL and len(value) > 1:
            message = f'{field}: "*" stands alone (all events) or not at all.'
            errors.append(FieldError(field, "out_of_range", message))
        elif item != ALL and item not in EVENT_TYPES:
            message = f'{field} must be "*" or one of {shown}.'
            errors.append(FieldError(field, "out_of_range", message))
        elif item in found:
            errors.append(FieldError(field, "duplicate", f"{field} repeats {item}."))
        else:
            found.append(item)
    return found if len(found) == len(value) else None


def _description(value: Any, errors: list[FieldError]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        errors.append(FieldError("description", "invalid_type", "description must be a string."))
    elif checks.CONTROL.search(value):
        message = checks.control_message("description")
        errors.append(FieldError("description", "invalid_format", message))
    elif len(value) > MAX_DESCRIPTION:
        message = f"description has at most {MAX_DESCRIPTION} characters."
        errors.append(FieldError("description", "too_long", message))
    else:
        return value
    return None


def check_write(
    body: dict[str, Any], policy: UrlPolicy, *, create: bool, full: FieldError | None = None
) -> EndpointWrite:
    """The body of a POST (`create`) or a partial PUT, every broken rule listed in one
    ValidationFailed (C1, C12). Unknown members are ignored; `status` is written by PUT only.
    `full` (endpoints_full's) is the url's one error: a URL that cannot be added is not
    resolved, and the employer learns the limit beside the other fields' errors."""
    errors: list[FieldError] = [] if full is None else [full]
    url = events = None
    for name in ("url", "events"):
        if full is not None and name == "url":
            continue
        if (create and name not in body) or (name in body and body[name] is None):
            errors.append(FieldError(name, "required", f"{name} is required."))
    if full is None and body.get("url") is not None:
        refused = check_url(
            body["url"],
            allow_http=policy.allow_http,
            allow_private=policy.allow_private,
            resolve=policy.resolve,
            allowed_ports=policy.allowed_ports,
        )
        if refused is not None:
            errors.append(refused)
        else:
            url = body["url"]
    if body.get("events") is not None:
        events = _events(body["events"], errors)
    description = _description(body.get("description"), errors)
    status = None
    if not create and "status" in body:
        status = body["status"]
        if not isinstance(status, str):
            errors.append(FieldError("status", "invalid_type", "status must be a string."))
        elif status not in ENDPOINT_STATUSES:
            message = "status must be enabled or disabled."
            errors.append(FieldError("status", "out_of_range", message))
    if errors:
        raise ValidationFailed(errors, subject="webhook")
    return EndpointWrite(url, events, description, "description" in body, status)


def shape(e: WebhookEndpoint, secret: str | None = None) -> dict[str, Any]:
    """An endpoint's read shape (the API's, and `jobpost webhooks list --json`'s); the secret
    only in the answer that made it (C12)."""
    body: dict[str, Any] = {
        "id": e.id,
        "url": e.url,
        "events": json.loads(e.events),
        "description": e.description,
        "status": e.status,
        "createdAt": timestamp(e.created_at),
    }
    if secret is not None:
        body["secret"] = secret
    return body


def _lock_employer(session: Session, employer_id: int) -> None:
    """Serialise the employer's endpoint writes, so two concurrent POSTs cannot make an
    eleventh (SQLite's BEGIN IMMEDIATE already serialises every write)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Employer.id).where(Employer.id == employer_id).with_for_update())


def endpoints_full(session: Session, employer_id: int) -> FieldError | None:
    """`too_many` on url when the employer has MAX_ENDPOINTS already (C12); checked again
    under the employer's lock by create_endpoint."""
    count = select(func.count()).select_from(ENDPOINTS).where(E.employer_id == employer_id)
    if session.execute(count).scalar_one() < MAX_ENDPOINTS:
        return None
    return FieldError(
        "url", "too_many", f"An employer has at most {MAX_ENDPOINTS} webhook endpoints."
    )


def create_endpoint(
    session: Session, employer_id: int, write: EndpointWrite, key: bytes, *, now: datetime
) -> tuple[WebhookEndpoint, str]:
    """A new enabled endpoint and its secret in the clear, which only this answer shows."""
    assert write.url is not None and write.events is not None
    _lock_employer(session, employer_id)
    if (full := endpoints_full(session, employer_id)) is not None:
        raise ValidationFailed([full], subject="webhook")
    secret = new_secret()
    endpoint = WebhookEndpoint(
        employer_id=employer_id,
        url=write.url,
        events=events_json(write.events),
        description=write.description,
        status="enabled",
        secret=encrypt(secret, key),
        created_at=now,
        updated_at=now,
    )
    session.add(endpoint)
    session.flush()
    return endpoint, secret


def get_endpoint(session: Session, employer_id: int, endpoint_id: int) -> WebhookEndpoint:
    """The employer's endpoint; another employer's is as absent as a missing one (C12)."""
    found = session.get(WebhookEndpoint, endpoint_id)
    if found is None or found.employer_id != employer_id:
        raise NotFound(f"No webhook has id {endpoint_id}.")
    return found


@dataclass(frozen=True)
class EndpointPage:
    endpoints: list[WebhookEndpoint]
    total: int


def list_endpoints(session: Session, employer_id: int, *, limit: int, offset: int) -> EndpointPage:
    """Oldest first (C12), paged as C6."""
    mine = WebhookEndpoint.employer_id == employer_id
    total = session.execute(select(func.count()).where(mine)).scalar_one()
    rows = session.scalars(
        select(WebhookEndpoint).where(mine).order_by(WebhookEndpoint.id).limit(limit).offset(offset)
    )
    return EndpointPage(list(rows), total)


def update_endpoint(endpoint: WebhookEndpoint, write: EndpointWrite, *, now: datetime) -> None:
    """A partial update. Disabling leaves queued deliveries to the worker, which finds the
    endpoint disabled; re-enabling makes it eligible for new events again (C12)."""
    if write.url is not None:
        endpoint.url = write.url
    if write.events is not None:
        endpoint.events = events_json(write.events)
    if write.has_description:
        endpoint.description = write.description
    if write.status is not None and write.status != endpoint.status:
        endpoint.status = write.status
        endpoint.disabled_reason = (
            "disabled by the employer" if write.status == "disabled" else None
        )
    endpoint.updated_at = now


def delete_endpoint(session: Session, endpoint: WebhookEndpoint) -> None:
    """The endpoint and, by the foreign keys' cascade, its deliveries: a task that claims one
    afterwards finds nothing to send. Messages left with no delivery go with the purge."""
    session.execute(delete(DELIVERIES).where(D.endpoint_id == endpoint.id))
    session.delete(endpoint)
    session.flush()


def rotate_secret(endpoint: WebhookEndpoint, key: bytes, *, now: datetime) -> str:
    """A new secret; the old one goes on signing for ROTATION_OVERLAP (C12). Rotating twice
    within it keeps only the secret just replaced."""
    secret = new_secret()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_until = now + ROTATION_OVERLAP
    endpoint.secret = encrypt(secret, key)
    endpoint.updated_at = now
    return secret


def send_test(session: Session, endpoint: WebhookEndpoint, *, now: datetime) -> str:
    """Emit `webhook.test` to this endpoint only (C12); 409 when it is disabled."""
    if endpoint.status != "enabled":
        raise WebhookDisabled(f"Webhook {endpoint.id} is disabled; enable it to test it.")
    data = {"webhookId": endpoint.id}
    return emit(session, endpoint.employer_id, TEST, data, endpoint_id=endpoint.id, now=now)


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
    meantime is a 409, never a second sending. Returns the delivery id to enqueue."""
    mine = and_(
        D.endpoint_id == endpoint_id,
        D.message_pk == select(M.id).where(M.message_id == message_id).scalar_subquery(),
    )
    retried: int | None = session.execute(
        update(DELIVERIES)
        .where(mine, D.status == "failed")
        .values(status="pending", step=0, due_at=now, lease_until=None, finished_at=None)
        .returning(D.id)
    ).scalar_one_or_none()
    if retried is not None:
        return retried
    if session.execute(select(D.status).where(mine)).first() is None:
        raise NotFound(f"Webhook {endpoint_id} has no delivery of message {message_id}.")
    raise DeliveryNotFailed(
        f"The delivery of {message_id} has not failed; only a failed one is retried."
    )


def key_needed(session: Session, settings: KeySource) -> None:
    """Stop a process that would need the key and has none: MissingKey, naming the
    variable, when neither JOBPOST_SECRET_KEY nor the key file exists and a webhook endpoint
    does (C12). Without endpoints, nothing needs it yet."""
    try:
        load_key(settings)
    except MissingKey:
        if session.execute(select(E.id).limit(1)).first() is not None:
            raise
