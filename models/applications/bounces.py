"""Bounces (C22): what becomes of an employer's copy after the relay took it.

Each copy leaves with a VERP envelope sender under BOUNCE_DOMAIN (`envelope_sender`), signed
with the service's key, so a delivery status notification (RFC 3464) names the copy it is
about and no one can name a copy they never received. `jobpost bounces` hands each message
it receives to `take`: a permanent failure makes the copy `undeliverable`, a temporary one is
recorded beside it; anything else is dropped and counted by reason. A relay refusing the
recipient at RCPT is a permanent failure too (`refused`). After FLAG_AFTER hard bounces the
employer's address is flagged (`address_flags`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes, policy
from email.message import Message
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, func, insert, select, update
from sqlalchemy.orm import Session

from models import employers
from models.applications.outbox import NOTICE_MAILS, NOTICES
from models.db import leases
from models.db.entities import (
    AddressFlag,
    AddressNotice,
    Application,
    Bounce,
    BounceDrop,
    Employer,
    Job,
    OutboxEntry,
)
from models.webhooks import messages as webhook_messages
from models.webhooks import payloads

BOUNCES = cast(Table, Bounce.__table__)
DROPS = cast(Table, BounceDrop.__table__)
FLAGS = cast(Table, AddressFlag.__table__)
OUTBOX = cast(Table, OutboxEntry.__table__)

FLAG_AFTER = 3  # hard bounces of one address
UNDELIVERABLE = "undeliverable"
UNDELIVERABLE_EVENT = "application.undeliverable"
FLAGGED_EVENT = "employer.address_flagged"

# Why a copy bounced, from the status code's subject and detail (RFC 3463); a closed list.
REASONS = (
    "mailbox_unknown",
    "domain_unknown",
    "mailbox_disabled",
    "mailbox_full",
    "message_too_large",
    "refused",
    "network",
    "other",
)
_BY_DETAIL = {
    "1.1": "mailbox_unknown",
    "1.0": "mailbox_unknown",
    "1.3": "mailbox_unknown",
    "1.6": "mailbox_unknown",
    "1.2": "domain_unknown",
    "1.10": "domain_unknown",
    "2.1": "mailbox_disabled",
    "2.2": "mailbox_full",
    "2.3": "message_too_large",
    "3.4": "message_too_large",
}
_BY_SUBJECT = {"7": "refused", "4": "network"}

# Why a message the receiver took was dropped; a closed list, counted in `bounce_drops`.
DROP_REASONS = (
    "not_our_address",
    "forged",
    "unknown_copy",
    "not_dsn",
    "malformed",
    "not_failure",
    "recipient_mismatch",
)

_STATUS = re.compile(r"[245]\.\d{1,3}\.\d{1,3}")
_LOCAL = re.compile(r"bounce-(\d{1,18})-([a-z2-7]{13})")
MAX_DIAGNOSTIC = 1000


class Dropped(Exception):
    """A message (or one of its reports) that says nothing of a known copy; `reason` is one
    of DROP_REASONS."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Notice:
    """One recipient's report: whom it is about (None if it does not say), whether the
    failure is permanent, its status code, and what the remote server said."""

    recipient: str | None
    permanent: bool
    status: str
    diagnostic: str | None

    @property
    def reason(self) -> str:
        return reason_of(self.status)


# --- VERP -----------------------------------------------------------------------------------


def verp_key(secret: bytes) -> bytes:
    """The signing key of envelope senders, derived from the service's key (never the key
    itself, which also encrypts webhook secrets)."""
    return hashlib.sha256(b"jobpost verp\0" + secret).digest()


def _signature(application_id: int, key: bytes) -> str:
    mac = hmac.new(key, f"copy-{application_id}".encode(), hashlib.sha256).digest()[:8]
    return base64.b32encode(mac).decode().rstrip("=").lower()


def envelope_sender(application_id: int, *, domain: str, key: bytes) -> str:
    """The copy's MAIL FROM: bounce-ID-SIGNATURE@BOUNCE_DOMAIN."""
    return f"bounce-{application_id}-{_signature(application_id, key)}@{domain}"


def copy_named(address: str, *, domain: str, key: bytes) -> int:
    """The application whose copy `address` (a recipient of the receiver) was the sender of;
    Dropped when it is no envelope sender of ours, or its signature is wrong."""
    local, at, host = address.strip("<>").rpartition("@")
    if not at or host.lower() != domain.lower():
        raise Dropped("not_our_address")
    found = _LOCAL.fullmatch(local.lower())
    if found is None:
        raise Dropped("not_our_address")
    application_id = int(found[1])
    if not hmac.compare_digest(found[2], _signature(application_id, key)):
        raise Dropped("forged")
    return application_id


# --- RFC 3464 -------------------------------------------------------------------------------


def reason_of(status: str) -> str:
    """The reason of a status code (RFC 3463 class.subject.detail)."""
    _, subject, detail = status.split(".")
    return _BY_DETAIL.get(f"{subject}.{detail}") or _BY_SUBJECT.get(subject, "other")


def notices(data: bytes) -> list[Notice]:
    """The failures a delivery status notification reports; Dropped if `data` is not one
    (not_dsn), says no failure (not_failure), or a report of it is unreadable (malformed)."""
    message = message_from_bytes(data, policy=policy.compat32)
    if message.get_content_type() != "multipart/report" or not message.is_multipart():
        raise Dropped("not_dsn")
    if (message.get_param("report-type") or "").__str__().lower() != "delivery-status":
        raise Dropped("not_dsn")
    status = next(
        (p for p in message.walk() if p.get_content_type() == "message/delivery-status"), None
    )
    if status is None:
        raise Dropped("not_dsn")
    blocks = status.get_payload()
    if not isinstance(blocks, list) or len(blocks) < 2:
        raise Dropped("malformed")
    found = [n for n in (_notice(b) for b in blocks[1:] if isinstance(b, Message)) if n]
    if not found:
        raise Dropped("not_failure")
    return found


def _notice(block: Message) -> Notice | None:
    """A per-recipient block as a Notice; None when it reports no failure (delivered,
    relayed, expanded). Dropped (malformed) without a readable Action and Status."""
    action = str(block.get("Action", "")).strip().lower()
    status = str(block.get("Status", "")).strip().split(" ")[0]
    if action not in ("failed", "delayed", "delivered", "relayed", "expanded"):
        raise Dropped("malformed")
    if not _STATUS.fullmatch(status):
        raise Dropped("malformed")
    if action not in ("failed", "delayed"):
        return None
    permanent = action == "failed" and status.startswith("5")
    return Notice(_address(block.get("Final-Recipient")), permanent, status, _said(block))


def _address(field: Any) -> str | None:
    """The address of an `rfc822; user@host` field."""
    if field is None:
        return None
    kind, _, address = str(field).partition(";")
    return address.strip().strip("<>") if kind.strip().lower() == "rfc822" else None


def _said(block: Message) -> str | None:
    field = block.get("Diagnostic-Code")
    if field is None:
        return None
    _, _, text = str(field).partition(";")
    said = " ".join(text.split())
    return said[:MAX_DIAGNOSTIC] or None


def refused(code: int, text: str) -> Notice:
    """The relay refusing the recipient at RCPT (C8's permanent failure), as a Notice: its
    enhanced status code when it gives one, else the reply's class."""
    first = text.split(" ", 1)[0]
    status = first if _STATUS.fullmatch(first) else f"{code // 100}.0.0"
    return Notice(None, True, status, f"{code} {text}"[:MAX_DIAGNOSTIC])


# --- recording ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Taken:
    """What one report did: its copy, whether the copy became undeliverable by it, and the
    webhook messages it emitted (`application.undeliverable`, `employer.address_flagged`)."""

    application_id: int
    undeliverable: bool = False
    events: tuple[str, ...] = ()


def drop(session: Session, reason: str, *, now: datetime) -> None:
    """Count a dropped message (or report) under `reason`."""
    counted = update(DROPS).where(DROPS.c.reason == reason)
    if leases.changed(session, counted.values(count=DROPS.c.count + 1, last_at=now)) == 0:
        session.execute(insert(DROPS).values(reason=reason, count=1, last_at=now))


def take(session: Session, application_id: int, notice: Notice, *, now: datetime) -> Taken:
    """A DSN's report on a copy: recorded; a permanent one makes a sent copy undeliverable.
    Dropped (unknown_copy, recipient_mismatch) when no copy of that application went to the
    address it names."""
    application = session.get(Application, application_id)
    if application is None:
        raise Dropped("unknown_copy")
    if notice.recipient is not None and notice.recipient.lower() != (
        application.application_email.lower()
    ):
        raise Dropped("recipient_mismatch")
    _insert(session, application_id, notice, "dsn", now)
    if not notice.permanent:
        return Taken(application_id)
    sent = and_(OUTBOX.c.application_id == application_id, OUTBOX.c.status == "sent")
    error = f"{notice.status} {notice.diagnostic or 'undeliverable'}"
    marked = update(OUTBOX).where(sent).values(status=UNDELIVERABLE, last_error=error)
    if leases.changed(session, marked) != 1:
        return Taken(application_id)
    return Taken(application_id, True, hard_bounced(session, application, notice, now=now))


def record_refused(
    session: Session, application_id: int, notice: Notice, *, now: datetime
) -> tuple[str, ...]:
    """The relay refused a copy's recipient, and the copy was marked undeliverable (its
    worker's finishing mark): the bounce, its events and the address's count."""
    application = session.get_one(Application, application_id)
    _insert(session, application_id, notice, "smtp", now)
    return hard_bounced(session, application, notice, now=now)


def _insert(
    session: Session, application_id: int, notice: Notice, source: str, now: datetime
) -> None:
    session.execute(
        insert(BOUNCES).values(
            application_id=application_id,
            permanent=notice.permanent,
            status=notice.status,
            reason=notice.reason,
            diagnostic=notice.diagnostic,
            source=source,
            received_at=now,
        )
    )


def hard_bounced(
    session: Session, application: Application, notice: Notice, *, now: datetime
) -> tuple[str, ...]:
    """A copy became undeliverable: `application.undeliverable`, and one more hard bounce of
    its address; the FLAG_AFTERth flags it and emits `employer.address_flagged`. The ids of
    the messages emitted."""
    session.expire(application)  # its outbox status and bounces, as just written
    data = payloads.installed().application(application)
    told = webhook_messages.emit(
        session,
        application.employer_id,
        UNDELIVERABLE_EVENT,
        data,
        application_id=application.id,
        now=now,
    )
    flag = _count(session, application.employer_id, application.application_email, notice, now)
    if flag.flagged_at is not None or flag.hard_bounces < FLAG_AFTER:
        return (told,)
    flag.flagged_at = now
    employers.flagged_of(session).pop(flag.employer_id, None)  # no longer what it knew
    session.flush()
    shown = payloads.installed().address_flagged(flag, jobs_using(session, flag))
    flagged = webhook_messages.emit(session, flag.employer_id, FLAGGED_EVENT, shown, now=now)
    _notify(session, flag, now)
    return (told, flagged)


def _notify(session: Session, flag: AddressFlag, now: datetime) -> None:
    """The notice to the employer's notification address, if it set one: pending, for the
    sweeper to enqueue (a flag is rare; a minute's wait is nothing beside its bounces)."""
    employer = session.get_one(Employer, flag.employer_id)
    if employer.notification_email is None:
        return
    notice = AddressNotice(
        employer_id=employer.id,
        address=flag.address,
        created_at=now,
        status="pending",
        attempts=0,
        next_attempt_at=now,
    )
    session.add(notice)
    session.flush()


_NOTICE_CLAIM = leases.claiming(NOTICES)
_N = NOTICE_MAILS.c
_NOTICE_READ = (
    select(
        _N.id,
        _N.attempts,
        _N.retry_from,
        _N.lease_until,
        _N.created_at,
        _N.address,
        _N.employer_id,
        Employer.name.label("employer_name"),
        Employer.language,
        Employer.notification_email,
        AddressFlag.hard_bounces,
        AddressFlag.reason,
    )
    .join(Employer, Employer.id == _N.employer_id)
    .outerjoin(
        AddressFlag,
        and_(AddressFlag.employer_id == _N.employer_id, AddressFlag.address == _N.address),
    )
    .where(_N.id == bindparam("entry"))
)


@dataclass(frozen=True)
class ClaimedNotice:
    """A claimed notice: its row (the outbox's claim columns, the employer's name, language
    and notification address, the flag), and the titles of the jobs that use the address."""

    row: Any
    jobs: list[tuple[int, str]]


def claim_notice(
    session: Session, notice_id: int, *, now: datetime, timing: Any
) -> ClaimedNotice | None:
    """The claim of C8 on a notice, then what it says (None if not won)."""
    params = {"entry": notice_id, "now": now, "lease": timing.lease_from(now)}
    if leases.changed(session, _NOTICE_CLAIM, params) != 1:
        return None
    row = session.execute(_NOTICE_READ, {"entry": notice_id}).one()
    using = select(Job.id, Job.title).where(
        Job.employer_id == row.employer_id, func.lower(Job.application_email) == row.address
    )
    return ClaimedNotice(row, [(i, t) for i, t in session.execute(using.order_by(Job.id))])


def _count(
    session: Session, employer_id: int, address: str, notice: Notice, now: datetime
) -> AddressFlag:
    key = (employer_id, address.lower())
    flag = session.get(AddressFlag, key, with_for_update=True)
    if flag is None:
        flag = AddressFlag(
            employer_id=employer_id,
            address=key[1],
            hard_bounces=0,
            reason=notice.reason,
            last_bounce_at=now,
        )
        session.add(flag)
    flag.hard_bounces += 1
    flag.reason, flag.last_bounce_at = notice.reason, now
    session.flush()
    return flag


def jobs_using(session: Session, flag: AddressFlag) -> list[Job]:
    """The employer's jobs that take applications at a flagged address."""
    found = select(Job).where(
        Job.employer_id == flag.employer_id, func.lower(Job.application_email) == flag.address
    )
    return list(session.scalars(found.order_by(Job.id)))


def flags_of(session: Session, employer_id: int) -> list[AddressFlag]:
    """The employer's flagged addresses, by address."""
    found = select(AddressFlag).where(
        AddressFlag.employer_id == employer_id, AddressFlag.flagged_at.is_not(None)
    )
    return list(session.scalars(found.order_by(AddressFlag.address)))


def is_flagged(session: Session, employer_id: int, address: str | None) -> bool:
    """Whether the employer's `address` is flagged: read once per session and employer, and
    not at all when the request's key said the employer has none (models.employers.attach)."""
    if address is None:
        return False
    known = employers.flagged_of(session)
    found = known.get(employer_id)
    if found is None:
        flagged = select(FLAGS.c.address).where(
            FLAGS.c.employer_id == employer_id, FLAGS.c.flagged_at.is_not(None)
        )
        found = known[employer_id] = frozenset(session.scalars(flagged))
    return address.lower() in found


def clear(session: Session, employer_id: int, address: str) -> bool:
    """The employer clears an address it mended (C22): the flag and its count go, so its
    jobs warn no more and three new hard bounces flag it again. Whether there was one."""
    key = (FLAGS.c.employer_id == employer_id, FLAGS.c.address == address.strip().lower())
    employers.flagged_of(session).pop(employer_id, None)
    return leases.changed(session, delete(FLAGS).where(*key)) == 1


def counts(
    session: Session,
) -> tuple[dict[tuple[bool, str], int], dict[str, int], dict[str, int]]:
    """For /metrics: bounces by (permanent, reason), drops by reason, notices by status."""
    by = select(BOUNCES.c.permanent, BOUNCES.c.reason, func.count()).group_by(
        BOUNCES.c.permanent, BOUNCES.c.reason
    )
    bounced = {(bool(p), r): n for p, r, n in session.execute(by)}
    dropped = {r: n for r, n in session.execute(select(DROPS.c.reason, DROPS.c.count))}
    return bounced, dropped, leases.counts(session, NOTICES)
