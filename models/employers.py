"""Employers and their API keys (C2): random keys, a visible prefix, stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, and_, bindparam, func, or_, select
from sqlalchemy.orm import Session, make_transient_to_detached

from models.core import checks
from models.core.dates import utcnow
from models.core.errors import FieldError, NotFound, ValidationFailed
from models.core.i18n import DEFAULT, LANGUAGES
from models.db.entities import AddressFlag, ApiKey, Employer, Job
from models.db.fast_reads import Precompiled
from models.jobs import compliance
from models.jobs import rows as job_rows
from models.jobs.rows import StoredJob

PLANS = ("standard", "unlimited")
PREFIX_LEN = 12
KEY_SCHEME = "jp_"


@dataclass(frozen=True)
class IssuedKey:
    employer_id: int
    prefix: str
    key: str  # shown once, never stored


def key_digest(key: str) -> str:
    # 32 random bytes leave nothing to brute-force, so a fast hash is enough here.
    return hashlib.sha256(key.encode()).hexdigest()


def create_employer(
    session: Session, name: str, plan: str = "standard", language: str = DEFAULT
) -> Employer:
    name = name.strip()
    if not 1 <= len(name) <= 128:
        raise ValueError("an employer name has 1 to 128 characters")
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}")
    _check_language(language)
    employer = Employer(name=name, plan=plan, language=language, created_at=utcnow())
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


def set_language(session: Session, employer_id: int, language: str) -> Employer:
    """The language of the emails the employer receives (C13)."""
    _check_language(language)
    employer = get_employer(session, employer_id)
    employer.language = language
    return employer


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")


def set_compliance(
    session: Session,
    employer_id: int,
    *,
    mode: str | None = None,
    ontario25_plus: bool | None = None,
) -> Employer:
    """The employer's C13 settings, each left as it is when None."""
    if mode is not None and mode not in compliance.MODES:
        raise ValueError(f"compliance must be one of {', '.join(compliance.MODES)}")
    employer = get_employer(session, employer_id)
    if mode is not None:
        employer.compliance = mode
    if ontario25_plus is not None:
        employer.ontario25_plus = ontario25_plus
    return employer


def update_settings(session: Session, employer_id: int, body: dict[str, Any]) -> Employer:
    """PUT /employer (C13): a partial update of the settings (language, compliance,
    ontario25Plus, C21's emailKnockedOut and C22's notificationEmail); every bad member reported at
    once, and nothing changed then. Other members are read-only and ignored."""
    errors: list[FieldError] = []
    mode = body.get("compliance")
    if "compliance" in body and (not isinstance(mode, str) or mode not in compliance.MODES):
        code = "out_of_range" if isinstance(mode, str) else "invalid_type"
        errors.append(FieldError("compliance", code, "compliance must be off, warn or enforce."))
    ontario = body.get("ontario25Plus")
    if "ontario25Plus" in body and not isinstance(ontario, bool):
        errors.append(
            FieldError("ontario25Plus", "invalid_type", "ontario25Plus must be true or false.")
        )
    knocked = body.get("emailKnockedOut")
    if "emailKnockedOut" in body and not isinstance(knocked, bool):
        errors.append(
            FieldError("emailKnockedOut", "invalid_type", "emailKnockedOut must be true or false.")
        )
    language = body.get("language")
    if "language" in body and (not isinstance(language, str) or language not in LANGUAGES):
        code = "out_of_range" if isinstance(language, str) else "invalid_type"
        errors.append(FieldError("language", code, "language must be en or fr."))
    notify = _notification_email(body, errors)
    if errors:
        raise ValidationFailed(errors, subject="employer")
    if language is not None:
        set_language(session, employer_id, language)
    if knocked is not None:  # C21: whether knocked-out applications are emailed
        found = session.get(Employer, employer_id)
        if found is not None:
            found.email_knocked_out = knocked
    if "notificationEmail" in body:
        get_employer(session, employer_id).notification_email = notify
    return set_compliance(session, employer_id, mode=mode, ontario25_plus=ontario)


def _notification_email(body: dict[str, Any], errors: list[FieldError]) -> str | None:
    """`notificationEmail` (C22): an address, or null to clear it."""
    value = body.get("notificationEmail")
    if value is None:
        return None
    try:
        return checks.email(value, "notificationEmail", max_len=254)
    except checks.Invalid as e:
        errors.append(e.error)
        return None


def list_employers(session: Session) -> list[Employer]:
    return list(session.scalars(select(Employer).order_by(Employer.id)))


def issue_key(session: Session, employer_id: int) -> IssuedKey:
    """Create a key for the employer; the returned key is the only copy there will ever be."""
    get_employer(session, employer_id)
    key = KEY_SCHEME + secrets.token_urlsafe(32)  # 256 bits of entropy
    prefix = key[:PREFIX_LEN]
    session.add(
        ApiKey(employer_id=employer_id, prefix=prefix, digest=key_digest(key), created_at=utcnow())
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


@dataclass(frozen=True)
class Access:
    """Whom a key speaks for (the employer's row, as plain values) and, when the request
    names a job, that job's version: None when this employer has no job of that id (another
    employer's job is as absent as a missing one)."""

    employer_id: int
    employer_name: str
    plan: str
    created_at: datetime
    # C13's settings: the mode of the rules, and Ontario's 25+ employees (defaults for the
    # serializers that read the employer's id and name only).
    compliance: str = "warn"
    ontario25_plus: bool = True
    job_version: int | None = None
    job: StoredJob | None = None  # the job whole, when asked for (`authenticate`)
    # The job's applicationEmail when it is flagged (C22): GET answers a warning of it.
    flagged_address: str | None = None
    # C23: the key's id, its scopes (None: every scope), and when it was last used.
    key_id: int = 0
    scopes: frozenset[str] | None = None
    last_used_at: datetime | None = None
    any_flagged: bool = True  # C22: whether any of its addresses is flagged (True: not known)

    def holds(self, scope: str) -> bool:
        return self.scopes is None or scope in self.scopes


_keys, _employers, _jobs = ApiKey.__table__.c, Employer.__table__.c, Job.__table__.c
_flags = AddressFlag.__table__.c
# Whether the employer has a flagged address at all (C22): a write asks which only then.
_ANY_FLAGGED = (
    select(_flags.employer_id)
    .where(_flags.employer_id == _employers.id, _flags.flagged_at.is_not(None))
    .exists()
)
_KEY_COLUMNS = (
    _keys.digest,
    _keys.id,
    _keys.scopes,
    _keys.last_used_at,
    _employers.id,
    _employers.name,
    _employers.plan,
    _employers.created_at,
    _employers.compliance,
    _employers.ontario25_plus,
    _ANY_FLAGGED,
)
_KEYS = ApiKey.__table__.join(Employer.__table__, _keys.employer_id == _employers.id)
# The named job's address when it is flagged (C22): a lookup by primary key, or null.
_FLAGGED = (
    select(_flags.address)
    .where(
        _flags.employer_id == _jobs.employer_id,
        _flags.address == func.lower(_jobs.application_email),
        _flags.flagged_at.is_not(None),
    )
    .correlate(Job.__table__)
    .scalar_subquery()
)
# Not revoked, and not expired (C23): `now` is bound by each request.
_LIVE = and_(
    _keys.revoked_at.is_(None),
    or_(_keys.expires_at.is_(None), _keys.expires_at > bindparam("now")),
)
_LIVE_KEY = Precompiled(
    select(*_KEY_COLUMNS).select_from(_KEYS).where(_keys.prefix == bindparam("prefix"), _LIVE)
)
# GET one job is the call clients repeat most: the key and the job's version in one statement.
_LIVE_KEY_AND_JOB = Precompiled(
    select(*_KEY_COLUMNS, _jobs.version, _FLAGGED)
    .select_from(
        _KEYS.outerjoin(
            Job.__table__,
            and_(_jobs.id == bindparam("job_id"), _jobs.employer_id == _keys.employer_id),
        )
    )
    .where(_keys.prefix == bindparam("prefix"), _LIVE)
)


# A GET of a job the process keeps no copy of: the key and the whole job in one statement.
_WHOLE_JOB = job_rows.whole_job()
_LIVE_KEY_AND_WHOLE_JOB = Precompiled(
    select(*_KEY_COLUMNS, _FLAGGED, *_WHOLE_JOB.columns)
    .select_from(
        _KEYS.outerjoin(
            _WHOLE_JOB.tables,
            and_(_jobs.id == bindparam("job_id"), _jobs.employer_id == _keys.employer_id),
        )
    )
    .where(_keys.prefix == bindparam("prefix"), _LIVE)
    .order_by(*_WHOLE_JOB.order)
)


def authenticate(
    connection: Connection, key: str | None, job_id: int | None = None, *, whole: bool = False
) -> Access | None:
    """Whom a presented key speaks for, or None if it is missing, unknown or revoked; with
    `job_id`, also the version of that job of the employer's, and with `whole` the job.

    Every API request asks, so it is one precompiled statement and no ORM object (`attach`
    makes the employer's when a request needs it), on a connection: a request that needs no
    more (GET one job, from the kept copies or not) opens no session.
    """
    if not key or len(key) < PREFIX_LEN or len(key) > 200 or not key.isprintable():
        return None
    params: dict[str, Any] = {"prefix": key[:PREFIX_LEN], "now": utcnow()}
    if job_id is None:
        row = _LIVE_KEY.first(connection, params)
    elif whole:
        rows = _LIVE_KEY_AND_WHOLE_JOB.all(connection, {**params, "job_id": job_id})
        return _with_job(key, rows)
    else:
        row = _LIVE_KEY_AND_JOB.first(connection, {**params, "job_id": job_id})
    if row is None or not hmac.compare_digest(row[0], key_digest(key)):
        return None
    width = len(_KEY_COLUMNS)
    version, flagged = row[width:] if len(row) > width else (None, None)
    return _access(row[:width], version, None, flagged)


def _access(
    key_row: tuple[Any, ...], version: int | None, job: StoredJob | None, flagged: str | None
) -> Access:
    """Access from the key's columns (`_KEY_COLUMNS`) and the job's."""
    (
        _,
        key_id,
        scopes,
        last_used,
        employer_id,
        name,
        plan,
        created_at,
        compliance,
        ontario25,
        any_flagged,
    ) = key_row
    return Access(
        employer_id,
        name,
        plan,
        created_at,
        compliance,
        ontario25,
        version,
        job,
        flagged,
        key_id=key_id,
        scopes=None if scopes is None else frozenset(scopes.split()),
        last_used_at=last_used,
        any_flagged=bool(any_flagged),
    )


def _with_job(key: str, rows: list[tuple[Any, ...]]) -> Access | None:
    """Access from rows of the key's columns and the job's (`job_rows.whole_job`)."""
    width = len(_KEY_COLUMNS)
    if not rows or not hmac.compare_digest(rows[0][0], key_digest(key)):
        return None
    flagged = rows[0][width]  # the flagged address, then the job's columns
    job = job_rows.gather([row[width + 1 :] for row in rows])
    version = None if job is None else job.version
    return _access(rows[0][:width], version, job, flagged)


def attach(session: Session, access: Access) -> Employer:
    """The employer of `access`, persistent in `session` without a query of its own."""
    known = session.identity_map.get(session.identity_key(Employer, access.employer_id))
    if known is not None:
        return cast(Employer, known)
    employer = Employer(
        id=access.employer_id,
        name=access.employer_name,
        plan=access.plan,
        created_at=access.created_at,
        compliance=access.compliance,
        ontario25_plus=access.ontario25_plus,
    )
    make_transient_to_detached(employer)
    session.add(employer)
    if not access.any_flagged:  # C22: the writes need not ask which of its addresses are
        flagged_of(session)[employer.id] = frozenset()
    return employer


def flagged_of(session: Session) -> dict[int, frozenset[str]]:
    """The flagged addresses of employers, as `session` knows them (C22): written by
    `attach` when the key's statement said there are none, read by the job writes."""
    known: dict[int, frozenset[str]] = session.info.setdefault("flagged_addresses", {})
    return known
