"""Alert subscriptions (C19): sign-up, the double opt-in, the manage link, erasure and export.

A sign-up makes a pending subscription and a confirmation token; only following that link
makes it confirmed, so no address gets digests it did not ask for. Tokens are random, given
out once in a link and kept as their SHA-256 (`AlertToken`): the database alone lets nobody
confirm, manage or unsubscribe an alert.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.orm import Session

from models.alerts import filters as alert_filters
from models.core import checks
from models.core.errors import FieldError, ValidationFailed
from models.db.entities import AlertSubscription, AlertToken
from models.jobs.feeds import Filters

MAX_EMAIL = 254  # as an applicant's (C8)
LANGUAGES = ("en", "fr")
FREQUENCIES = ("daily", "weekly")
STATES = ("pending", "confirmed", "unsubscribed")
# A confirmation link is good for this long; a manage link for as long as its alert.
CONFIRM_DAYS = 7
PER_ADDRESS = 20  # live alerts one address may hold: a sign-up form is no mailing list


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _same_address(column: Any, email: str) -> ColumnElement[bool]:
    return func.lower(column) == func.lower(email)


def issue(session: Session, subscription: AlertSubscription, purpose: str, now: datetime) -> str:
    """A new link's token (`confirm` or `manage`), kept as its digest; the token itself only
    leaves in the link."""
    token = secrets.token_urlsafe(24)
    session.add(
        AlertToken(
            digest=digest(token), subscription_id=subscription.id, purpose=purpose, created_at=now
        )
    )
    return token


@dataclass(frozen=True)
class SignUp:
    """A sign-up's subscription and the one-time confirmation token its email carries."""

    subscription: AlertSubscription
    confirm_token: str


def read_sign_up(body: dict[str, Any]) -> tuple[str, str]:
    """The address and frequency of a sign-up (every broken rule at once, C1)."""
    errors: list[FieldError] = []
    email, frequency = "", "daily"
    raw = body.get("email")
    try:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise checks.Invalid("email", "required", "email is required.")
        email = checks.email(raw, "email", max_len=MAX_EMAIL)
    except checks.Invalid as e:
        errors.append(e.error)
    chosen = body.get("frequency") or "daily"
    if chosen not in FREQUENCIES:
        errors.append(FieldError("frequency", "out_of_range", "frequency is daily or weekly."))
    else:
        frequency = chosen
    if errors:
        raise ValidationFailed(errors, subject="alert")
    return email, frequency


def sign_up(
    session: Session,
    email: str,
    frequency: str,
    language: str,
    filters: Filters,
    *,
    now: datetime,
) -> SignUp:
    """A pending subscription and its confirmation token. The same address signing up to the
    same search again gets a new link to the alert it has (pending or confirmed) rather than
    a second alert; its frequency and language change there, once confirmed, not here."""
    query = alert_filters.to_query(filters)
    live = AlertSubscription.state != "unsubscribed"
    existing = session.scalars(
        select(AlertSubscription)
        .where(_same_address(AlertSubscription.email, email), live)
        .order_by(AlertSubscription.id)
    ).all()
    same = next((s for s in existing if s.filters == query), None)
    if same is None:
        if len(existing) >= PER_ADDRESS:
            message = f"An address may have at most {PER_ADDRESS} alerts."
            raise ValidationFailed([FieldError("email", "too_many", message)], subject="alert")
        same = AlertSubscription(
            email=email,
            language=language if language in LANGUAGES else "en",
            frequency=frequency,
            filters=query,
            state="pending",
            created_at=now,
        )
        session.add(same)
        session.flush()
    return SignUp(same, issue(session, same, "confirm", now))


def _by_token(
    session: Session, token: str, purpose: str, *, since: datetime | None = None
) -> AlertSubscription | None:
    if not token or len(token) > 100:
        return None
    statement = (
        select(AlertSubscription)
        .join(AlertToken, AlertToken.subscription_id == AlertSubscription.id)
        .where(AlertToken.digest == digest(token), AlertToken.purpose == purpose)
        .with_for_update(of=AlertSubscription)
    )
    if since is not None:
        statement = statement.where(AlertToken.created_at >= since)
    return session.scalars(statement).one_or_none()


@dataclass(frozen=True)
class Confirmed:
    """A confirmed alert and the manage token the confirmation page links to."""

    subscription: AlertSubscription
    manage_token: str


def confirm(session: Session, token: str, *, now: datetime) -> Confirmed | None:
    """Follow a confirmation link: the alert confirmed (its digests start from now), its
    confirmation tokens spent. None for a token unknown, spent, expired, or of an alert
    unsubscribed since."""
    since = now - timedelta(days=CONFIRM_DAYS)
    found = _by_token(session, token, "confirm", since=since)
    if found is None or found.state == "unsubscribed":
        return None
    if found.state == "pending":
        found.state, found.confirmed_at, found.last_sent_at = "confirmed", now, now
    session.execute(
        delete(AlertToken).where(
            AlertToken.subscription_id == found.id, AlertToken.purpose == "confirm"
        )
    )
    return Confirmed(found, issue(session, found, "manage", now))


def manage_token(session: Session, subscription: AlertSubscription, *, now: datetime) -> str:
    """A new manage link's token, for an email about this alert."""
    return issue(session, subscription, "manage", now)


def managed(session: Session, token: str) -> AlertSubscription | None:
    """The alert a manage link names, in any state; None for an unknown token."""
    return _by_token(session, token, "manage")


def set_frequency(
    session: Session, token: str, frequency: str, *, now: datetime
) -> AlertSubscription | None:
    """Change a confirmed alert's frequency (ValidationFailed for one of neither kind)."""
    if frequency not in FREQUENCIES:
        message = "frequency is daily or weekly."
        raise ValidationFailed([FieldError("frequency", "out_of_range", message)], subject="alert")
    found = managed(session, token)
    if found is not None and found.state == "confirmed":
        found.frequency = frequency
    return found


def unsubscribe(session: Session, token: str, *, now: datetime) -> AlertSubscription | None:
    """One click, no confirmation (RFC 8058): the alert sends nothing more. Again is a no-op."""
    found = managed(session, token)
    if found is not None and found.state != "unsubscribed":
        found.state, found.unsubscribed_at = "unsubscribed", now
    return found


def of_address(session: Session, email: str) -> list[AlertSubscription]:
    """Every alert of an address, in any state (C13's export)."""
    return list(
        session.scalars(
            select(AlertSubscription)
            .where(_same_address(AlertSubscription.email, email))
            .order_by(AlertSubscription.id)
        )
    )


def erase_address(session: Session, email: str) -> int:
    """Delete every alert of an address and its tokens (C13's erasure); how many alerts."""
    result = session.execute(
        delete(AlertSubscription)
        .where(_same_address(AlertSubscription.email, email))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
