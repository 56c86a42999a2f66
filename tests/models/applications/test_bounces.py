"""C22: VERP senders, RFC 3464 reports read, and what a bounce records, on both backends (the
`sessions` fixture, rolled back after each test)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from models.applications import bounces
from models.core.dates import utcnow
from models.db.entities import AddressFlag, Application, Bounce, OutboxEntry, WebhookEndpoint
from models.webhooks.tables import MESSAGES
from tests.models.upkeep_rows import add_application, add_job, employer_id

KEY = bounces.verp_key(b"a key of the service's, 32 bytes")
DOMAIN = "bounces.jobs.test"


def dsn(*blocks: str, report_type: str = "delivery-status") -> bytes:
    """A delivery status notification as a relay writes one (RFC 3464)."""
    per_recipient = "".join(f"\r\n{b.strip()}\r\n" for b in blocks)
    return (
        "From: MAILER-DAEMON@relay.test\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        f'Content-Type: multipart/report; report-type={report_type}; boundary="B"\r\n\r\n'
        "--B\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        "--B\r\nContent-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; relay.test\r\n"
        f"{per_recipient}"
        "--B--\r\n"
    ).encode()


FAILED = """Final-Recipient: rfc822; jobs@upkeep.test
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1 <jobs@upkeep.test>: Recipient address rejected"""
DELAYED = """Final-Recipient: rfc822; jobs@upkeep.test
Action: delayed
Status: 4.2.2
Diagnostic-Code: smtp; 452 4.2.2 mailbox full"""


def test_a_verp_sender_names_its_copy_and_a_changed_one_is_forged() -> None:
    sender = bounces.envelope_sender(42, domain=DOMAIN, key=KEY)
    local = sender.split("@")[0]
    assert sender.endswith(f"@{DOMAIN}") and local.startswith("bounce-42-")
    assert bounces.copy_named(sender, domain=DOMAIN, key=KEY) == 42
    assert bounces.copy_named(f"<{sender.upper()}>", domain=DOMAIN, key=KEY) == 42
    other = bounces.envelope_sender(43, domain=DOMAIN, key=KEY)
    cases = {
        local.replace("bounce-42-", "bounce-43-") + f"@{DOMAIN}": "forged",
        bounces.envelope_sender(42, domain=DOMAIN, key=bounces.verp_key(b"x")): "forged",
        other.replace(DOMAIN, "elsewhere.test"): "not_our_address",
        f"postmaster@{DOMAIN}": "not_our_address",
        "bounce-42@": "not_our_address",
    }
    for address, reason in cases.items():
        with pytest.raises(bounces.Dropped) as dropped:
            bounces.copy_named(address, domain=DOMAIN, key=KEY)
        assert dropped.value.reason == reason, address


def test_a_report_is_read_per_recipient() -> None:
    [hard] = bounces.notices(dsn(FAILED))
    assert (hard.recipient, hard.permanent, hard.status, hard.reason) == (
        "jobs@upkeep.test",
        True,
        "5.1.1",
        "mailbox_unknown",
    )
    assert hard.diagnostic == "550 5.1.1 <jobs@upkeep.test>: Recipient address rejected"
    [soft] = bounces.notices(dsn(DELAYED, FAILED.replace("Action: failed", "Action: delivered")))
    assert (soft.permanent, soft.reason) == (False, "mailbox_full")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"From: someone@example.org\r\nSubject: hello\r\n\r\nHi!\r\n", "not_dsn"),
        (dsn(FAILED, report_type="disposition-notification"), "not_dsn"),
        (dsn(FAILED.replace("Status: 5.1.1", "Status: bad")), "malformed"),
        (dsn(FAILED.replace("Action: failed", "Action: exploded")), "malformed"),
        (dsn(), "malformed"),
        (dsn(FAILED.replace("Action: failed", "Action: relayed")), "not_failure"),
        (b"\xff\xfe garbage \x00", "not_dsn"),
    ],
)
def test_what_is_no_failure_report_is_dropped_with_its_reason(data: bytes, reason: str) -> None:
    with pytest.raises(bounces.Dropped) as dropped:
        bounces.notices(data)
    assert dropped.value.reason == reason


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("5.1.2", "domain_unknown"),
        ("5.2.1", "mailbox_disabled"),
        ("5.3.4", "message_too_large"),
        ("5.7.1", "refused"),
        ("4.4.7", "network"),
        ("5.5.0", "other"),
    ],
)
def test_a_status_code_has_its_reason(status: str, reason: str) -> None:
    assert bounces.reason_of(status) == reason


def test_a_refusal_at_rcpt_keeps_its_enhanced_code() -> None:
    assert bounces.refused(550, "5.1.1 no such user").status == "5.1.1"
    assert bounces.refused(554, "no thanks").status == "5.0.0"


def sent_copy(sessions: sessionmaker[Session], owner: int | None = None) -> int:
    owner = owner or employer_id(sessions, "standard")
    job_id = add_job(sessions, owner)
    return add_application(sessions, job_id, age=timedelta(minutes=5), delivery="sent")


def events(session: Session, type: str) -> int:
    found = select(MESSAGES.c.id).where(MESSAGES.c.type == type)
    return len(session.execute(found).all())


@pytest.fixture
def hooked(sessions: sessionmaker[Session]) -> int:
    """An employer with an endpoint that takes every event, so events are written."""
    owner = employer_id(sessions, "standard")
    with sessions() as s:
        s.add(
            WebhookEndpoint(
                employer_id=owner,
                url="https://hooks.example.com/in",
                events='["*"]',
                secret="x",
                status="enabled",
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
        s.commit()
    return owner


def test_a_permanent_report_makes_a_sent_copy_undeliverable_once(
    sessions: sessionmaker[Session], hooked: int
) -> None:
    app_id = sent_copy(sessions, hooked)
    [notice] = bounces.notices(dsn(FAILED))
    with sessions() as s:
        taken = bounces.take(s, app_id, notice, now=utcnow())
        again = bounces.take(s, app_id, notice, now=utcnow())
        s.commit()
        assert taken.undeliverable and len(taken.events) == 1
        assert not again.undeliverable and again.events == ()
        entry = s.get_one(OutboxEntry, app_id)
        assert entry.status == "undeliverable"
        assert entry.last_error == "5.1.1 550 5.1.1 <jobs@upkeep.test>: Recipient address rejected"
        assert len(s.scalars(select(Bounce).where(Bounce.application_id == app_id)).all()) == 2
        assert events(s, "application.undeliverable") == 1


def test_a_temporary_report_is_recorded_and_the_copy_stays_sent(
    sessions: sessionmaker[Session],
) -> None:
    app_id = sent_copy(sessions)
    [notice] = bounces.notices(dsn(DELAYED))
    with sessions() as s:
        assert not bounces.take(s, app_id, notice, now=utcnow()).undeliverable
        s.commit()
        assert s.get_one(OutboxEntry, app_id).status == "sent"
        [kept] = s.get_one(Application, app_id).bounces
        assert (kept.permanent, kept.reason, kept.source) == (False, "mailbox_full", "dsn")


def test_a_report_on_another_address_or_no_copy_is_dropped(
    sessions: sessionmaker[Session],
) -> None:
    app_id = sent_copy(sessions)
    [notice] = bounces.notices(dsn(FAILED.replace("jobs@upkeep.test", "someone@else.test")))
    with sessions() as s:
        for application_id, reason in ((app_id, "recipient_mismatch"), (10**9, "unknown_copy")):
            with pytest.raises(bounces.Dropped) as dropped:
                bounces.take(s, application_id, notice, now=utcnow())
            assert dropped.value.reason == reason
            bounces.drop(s, reason, now=utcnow())
        bounces.drop(s, "forged", now=utcnow())
        bounces.drop(s, "forged", now=utcnow())
        s.commit()
        assert s.get_one(OutboxEntry, app_id).status == "sent"
        assert bounces.counts(s)[1] == {"recipient_mismatch": 1, "unknown_copy": 1, "forged": 2}


def test_the_third_hard_bounce_of_an_address_flags_it_once(
    sessions: sessionmaker[Session], hooked: int
) -> None:
    copies = [sent_copy(sessions, hooked) for _ in range(4)]
    [notice] = bounces.notices(dsn(FAILED.replace("jobs@upkeep.test", "JOBS@upkeep.test")))
    with sessions() as s:
        told = [bounces.take(s, c, notice, now=utcnow()).events for c in copies]
        s.commit()
        assert [len(t) for t in told] == [1, 1, 2, 1]
        flag = s.get_one(AddressFlag, (hooked, "jobs@upkeep.test"))
        assert (flag.hard_bounces, flag.reason) == (4, "mailbox_unknown")
        assert flag.flagged_at is not None
        assert events(s, "employer.address_flagged") == 1
        jobs = bounces.jobs_using(s, flag)
        assert len(jobs) == 4
        assert bounces.counts(s)[0] == {(True, "mailbox_unknown"): 4}
