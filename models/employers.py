"""Employers and their API keys (C2): random keys, a visible prefix, stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from models.dates import utcnow
from models.entities import ApiKey, Employer
from models.errors import NotFound

PLANS = ("standard", "unlimited")
PREFIX_LEN = 12
KEY_SCHEME = "jp_"


@dataclass(frozen=True)
class IssuedKey:
    employer_id: int
    prefix: str
    key: str  # shown once, never stored


def _digest(key: str) -> str:
    # 32 random bytes leave nothing to brute-force, so a fast hash is enough here.
    return hashlib.sha256(key.encode()).hexdigest()


def create_employer(session: Session, name: str, plan: str = "standard") -> Employer:
    name = name.strip()
    if not 1 <= len(name) <= 128:
        raise ValueError("an employer name has 1 to 128 characters")
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}")
    employer = Employer(name=name, plan=plan, created_at=utcnow())
    session.add(employer)
    session.flush()
    return employer


def get_employer(session: Session, employer_id: int) -> Employer:
    employer = session.get(Employer, employer_id)
    if employer is None:
        raise NotFound(f"No employer has id {employer_id}.")
    return employer


def set_plan(session: Session, employer_id: int, plan: str) -> Employer:
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}")
    employer = get_employer(session, employer_id)
    employer.plan = plan
    return employer


def list_employers(session: Session) -> list[Employer]:
    return list(session.scalars(select(Employer).order_by(Employer.id)))


def issue_key(session: Session, employer_id: int) -> IssuedKey:
    """Create a key for the employer; the returned key is the only copy there will ever be."""
    get_employer(session, employer_id)
    key = KEY_SCHEME + secrets.token_urlsafe(32)  # 256 bits of entropy
    prefix = key[:PREFIX_LEN]
    session.add(
        ApiKey(employer_id=employer_id, prefix=prefix, digest=_digest(key), created_at=utcnow())
    )
    session.flush()
    return IssuedKey(employer_id=employer_id, prefix=prefix, key=key)


def revoke_key(session: Session, prefix: str) -> ApiKey:
    api_key = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if api_key is None:
        raise NotFound(f"No key has the prefix {prefix}.")
    if api_key.revoked_at is None:
        api_key.revoked_at = utcnow()
    return api_key


def authenticate(session: Session, key: str | None) -> Employer | None:
    """The employer a presented key belongs to, or None if it is missing, unknown or revoked."""
    if not key or len(key) < PREFIX_LEN or len(key) > 200 or not key.isprintable():
        return None
    api_key = session.scalar(select(ApiKey).where(ApiKey.prefix == key[:PREFIX_LEN]))
    if api_key is None or api_key.revoked_at is not None:
        return None
    if not hmac.compare_digest(api_key.digest, _digest(key)):
        return None
    return api_key.employer
