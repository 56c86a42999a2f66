"""API keys an employer manages itself (C23): scopes, expiry, rotation with an overlap, and
revocation. A key may grant only what it holds; the secret is returned once and kept only as
its SHA-256 (models.employers)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, or_, select, update
from sqlalchemy.orm import Session

from models.core import checks
from models.core.errors import FieldError, InsufficientScope, NotFound, ValidationFailed
from models.db.entities import ApiKey
from models.employers import KEY_SCHEME, PREFIX_LEN, Access, key_digest

# What a key may do; each keyed route names the one it needs (api/auth.py).
SCOPES = (
    "jobs:read",
    "jobs:write",
    "applications:read",
    "applications:write",
    "syncs",
    "webhooks",
    "employer",
)
MAX_KEYS = 50  # live keys per employer
MAX_LIFETIME = timedelta(days=3 * 366)
DEFAULT_OVERLAP_SECONDS = 86400  # a rotated key works this long beside its successor
MAX_OVERLAP_SECONDS = 7 * 86400
TOUCH_SECONDS = 60  # last_used_at is kept to the minute: one write a minute at most


@dataclass(frozen=True)
class Issued:
    """A key just made: its row, and its secret (shown once, never stored)."""

    key: ApiKey
    secret: str


def scopes_of(key: ApiKey) -> list[str]:
    """The key's scopes in SCOPES' order; every scope for a key made before scopes."""
    held = SCOPES if key.scopes is None else key.scopes.split()
    return [s for s in SCOPES if s in held]


def live(session: Session, employer_id: int, *, now: datetime) -> list[ApiKey]:
    """The employer's keys that work now, oldest first."""
    found = select(ApiKey).where(
        ApiKey.employer_id == employer_id,
        ApiKey.revoked_at.is_(None),
        or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now),
    )
    return list(session.scalars(found.order_by(ApiKey.id)))


def one(session: Session, employer_id: int, key_id: int, *, now: datetime) -> ApiKey:
    """A live key of the employer's; another employer's key is as absent as a missing one."""
    key = session.get(ApiKey, key_id)
    if key is None or key.employer_id != employer_id or key.revoked_at is not None:
        raise NotFound(f"No key has id {key_id}.")
    if key.expires_at is not None and key.expires_at <= now:
        raise NotFound(f"No key has id {key_id}.")
    return key


def create(session: Session, access: Access, body: dict[str, Any], *, now: datetime) -> Issued:
    """POST /keys: a key with `scopes` (by default the caller's own), an optional
    `expiresAt` and `description`; every bad member reported at once."""
    errors: list[FieldError] = []
    scopes = _scopes(body, errors, default=_held(access))
    expires = _expiry(body, errors, now=now)
    description = _description(body, errors)
    if errors:
        raise ValidationFailed(errors, subject="key")
    _grantable(access, scopes)
    if len(live(session, access.employer_id, now=now)) >= MAX_KEYS:
        message = f"An employer has at most {MAX_KEYS} live keys: revoke one first."
        raise ValidationFailed([FieldError("scopes", "too_many", message)], subject="key")
    return _issue(session, access.employer_id, scopes, expires, description, now)


def rotate(
    session: Session, access: Access, key_id: int, body: dict[str, Any], *, now: datetime
) -> Issued:
    """POST /keys/{id}/rotate: a successor with the same scopes, expiry and description;
    the old key works `overlapSeconds` more (by default a day), then stops."""
    old = one(session, access.employer_id, key_id, now=now)
    errors: list[FieldError] = []
    overlap = body.get("overlapSeconds", DEFAULT_OVERLAP_SECONDS)
    if isinstance(overlap, bool) or not isinstance(overlap, int):
        message = "overlapSeconds is a whole number of seconds."
        errors.append(FieldError("overlapSeconds", "invalid_type", message))
    elif not 0 <= overlap <= MAX_OVERLAP_SECONDS:
        message = f"overlapSeconds is from 0 to {MAX_OVERLAP_SECONDS} (7 days)."
        errors.append(FieldError("overlapSeconds", "out_of_range", message))
    if errors:
        raise ValidationFailed(errors, subject="key")
    scopes = scopes_of(old)
    _grantable(access, scopes)
    kept_until = old.expires_at  # the successor's, as the old key had it
    ends = now + timedelta(seconds=overlap)
    old.expires_at = ends if kept_until is None else min(kept_until, ends)
    return _issue(session, access.employer_id, scopes, kept_until, old.description, now)


def revoke(session: Session, access: Access, key_id: int, *, now: datetime) -> None:
    """DELETE /keys/{id}: the key stops at once (the caller's own included)."""
    key = one(session, access.employer_id, key_id, now=now)
    _grantable(access, scopes_of(key))
    key.revoked_at = now


def touch(connection: Connection, key_id: int, *, now: datetime) -> None:
    """Record the key's use (at most once a minute per key: the caller checks)."""
    connection.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=now))


def stale(access: Access, now: datetime) -> bool:
    """Whether the key's last use is worth recording again."""
    last = access.last_used_at
    return last is None or (now - last).total_seconds() >= TOUCH_SECONDS


def _issue(
    session: Session,
    employer_id: int,
    scopes: list[str],
    expires: datetime | None,
    description: str | None,
    now: datetime,
) -> Issued:
    secret = KEY_SCHEME + secrets.token_urlsafe(32)  # 256 bits of entropy
    key = ApiKey(
        employer_id=employer_id,
        prefix=secret[:PREFIX_LEN],
        digest=key_digest(secret),
        created_at=now,
        scopes=" ".join(scopes),
        expires_at=expires,
        description=description,
    )
    session.add(key)
    session.flush()
    return Issued(key, secret)


def _held(access: Access) -> list[str]:
    return [s for s in SCOPES if access.holds(s)]


def _grantable(access: Access, scopes: list[str]) -> None:
    """A key may not grant (or rotate, or revoke) what it does not hold."""
    for scope in scopes:
        if not access.holds(scope):
            raise InsufficientScope(
                scope, f"This key does not hold {scope}, so it cannot grant it."
            )


def _scopes(body: dict[str, Any], errors: list[FieldError], *, default: list[str]) -> list[str]:
    if "scopes" not in body:
        return default
    value = body["scopes"]
    if not isinstance(value, list):
        errors.append(FieldError("scopes", "invalid_type", "scopes is an array of scopes."))
        return []
    if not value:
        errors.append(FieldError("scopes", "too_few", "scopes names at least one scope."))
    found: list[str] = []
    for i, scope in enumerate(value):
        field = f"scopes[{i}]"
        if not isinstance(scope, str):
            errors.append(FieldError(field, "invalid_type", f"{field} is a string."))
        elif scope not in SCOPES:
            message = f"{field} is one of {', '.join(SCOPES)}."
            errors.append(FieldError(field, "out_of_range", message))
        elif scope in found:
            errors.append(FieldError(field, "duplicate", f"{field} repeats {scope}."))
        else:
            found.append(scope)
    return [s for s in SCOPES if s in found]


def _expiry(body: dict[str, Any], errors: list[FieldError], *, now: datetime) -> datetime | None:
    value = body.get("expiresAt")
    if value is None:
        return None
    try:
        moment = checks.instant(value, "expiresAt")
    except checks.Invalid as e:
        errors.append(e.error)
        return None
    if not now < moment <= now + MAX_LIFETIME:
        message = "expiresAt is in the future, and at most 3 years away."
        errors.append(FieldError("expiresAt", "out_of_range", message))
    return moment


def _description(body: dict[str, Any], errors: list[FieldError]) -> str | None:
    value = body.get("description")
    if value is None:
        return None
    try:
        return checks.string(value, "description", max_len=200, trim=True)
    except checks.Invalid as e:
        errors.append(e.error)
        return None
