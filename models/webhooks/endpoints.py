"""Webhook endpoints (C12): the rules of an endpoint's write, and the endpoint operations the
API and the CLI share (create, list, update, delete, rotate the secret, send a test)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from models.core import checks
from models.core.errors import (
    FieldError,
    NotFound,
    ValidationFailed,
    WebhookDisabled,
)
from models.db.entities import Employer, WebhookEndpoint
from models.webhooks.messages import ALL, EVENT_TYPES, TEST, D, E, emit, events_json
from models.webhooks.secrets import KeySource, MissingKey, encrypt, load_key, new_secret
from models.webhooks.tables import DELIVERIES, ENDPOINTS
from models.webhooks.urls import PortRanges, Resolve, check_url, resolve

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


def key_needed(session: Session, settings: KeySource) -> None:
    """Stop a process that would need the key and has none: MissingKey, naming the
    variable, when neither JOBPOST_SECRET_KEY nor the key file exists and a webhook endpoint
    does (C12). Without endpoints, nothing needs it yet."""
    try:
        load_key(settings)
    except MissingKey:
        if session.execute(select(E.id).limit(1)).first() is not None:
            raise
