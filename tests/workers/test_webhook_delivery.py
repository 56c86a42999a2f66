"""C12 delivery in process: `workers.webhooks.delivery.deliver` against a real HTTPS receiver
on a committed database (SQLite and PostgreSQL), signatures checked with the Standard
Webhooks library."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from prometheus_client import REGISTRY
from sqlalchemy import Engine, event, select, update
from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from models import employers
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import WebhookDelivery, WebhookEndpoint
from models.db.unit_of_work import autocommit_sessions, make_sessionmaker, session_scope
from models.webhooks import delivery as deliveries
from models.webhooks import messages as webhook_messages
from models.webhooks import secrets
from tests.conftest import migrated
from tests.webhook_receiver import Behaviour, Receiver, receiving
from workers.webhooks import client, delivery

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = Fernet.generate_key()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """Committed, since a delivery's steps commit and a test races another session."""
    with migrated(request.param, tmp_path_factory.mktemp("hooks")) as engine:
        yield engine


@pytest.fixture
def factory(database: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(database)


# The receivers listen on free ports: the tests allow every port beyond the web ports (C12).
ANY_PORT = ((1, 65535),)


@pytest.fixture
def hook_settings(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings,
        secret_key=KEY.decode(),
        webhook_allow_private=True,
        webhook_allowed_ports=ANY_PORT,
    )


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with receiving(tmp_path) as r:
        yield r


def local(host: str, port: int, timeout: float) -> list[str]:
    return ["127.0.0.1"]


def sender_for(receiver: Receiver, **kw: Any) -> client.Client:
    return client.Client(allowed=lambda ip: True, resolve=local, ssl_context=receiver.trust(), **kw)


def endpoint(
    factory: sessionmaker[Session],
    receiver: Receiver,
    *,
    employer_id: int | None = None,
    events_json: str = '["*"]',
    age: timedelta = timedelta(0),
    previous: str | None = None,
) -> tuple[int, int]:
    """A new employer (unless given) with one enabled endpoint at the receiver."""
    now = utcnow() - age
    with session_scope(factory) as s:
        if employer_id is None:
            employer_id = employers.create_employer(s, f"Acme {time.monotonic_ns()}").id
        row = WebhookEndpoint(
            employer_id=employer_id,
            url=receiver.url(),
            events=events_json,
            status="enabled",
            secret=secrets.encrypt(SECRET, KEY),
            previous_secret=None if previous is None else secrets.encrypt(previous, KEY),
            previous_secret_until=None if previous is None else utcnow() + timedelta(hours=24),
            created_at=now,
            updated_at=now,
        )
        s.add(row)
        s.flush()
        return employer_id, row.id


def emit(factory: sessionmaker[Session], employer_id: int, type: str = "job.expired") -> list[int]:
    with session_scope(factory) as s:
        message = webhook_messages.emit(
            s, employer_id, type, {"id": 7, "title": "Cook"}, now=utcnow()
        )
        return webhook_messages.pending_of(s, [message], now=utcnow())


def row(factory: sessionmaker[Session], delivery_id: int) -> WebhookDelivery:
    with factory() as s:
        found = s.get(WebhookDelivery, delivery_id)
        assert found is not None
        return found


def endpoint_row(factory: sessionmaker[Session], endpoint_id: int) -> WebhookEndpoint:
    with factory() as s:
        found = s.get(WebhookEndpoint, endpoint_id)
        assert found is not None
        return found


def make_due(factory: sessionmaker[Session], delivery_id: int) -> None:
    with session_scope(factory) as s:
        s.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id)
            .values(due_at=utcnow() - timedelta(seconds=1))
        )


def deliver(
    factory: sessionmaker[Session], s: Settings, receiver: Receiver, delivery_id: int, **kw: Any
) -> str:
    return delivery.deliver(factory, s, delivery_id, sender=sender_for(receiver, **kw))


def test_a_delivery_is_signed_sent_once_and_recorded(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    counted = {"event": "job.expired", "outcome": "succeeded"}
    before = REGISTRY.get_sample_value("jobpost_webhook_deliveries_total", counted) or 0
    assert deliver(factory, hook_settings, receiver, d) == "succeeded"
    assert REGISTRY.get_sample_value("jobpost_webhook_deliveries_total", counted) == before + 1
    [got] = receiver.received
    body = Webhook(SECRET).verify(got.body, got.headers)
    assert body["type"] == "job.expired" and body["data"] == {"id": 7, "title": "Cook"}
    assert got.headers["webhook-id"].startswith("msg_")
    done = row(factory, d)
    assert (done.status, done.attempts, done.last_status_code) == ("succeeded", 1, 204)
    assert done.delivered_at is not None and done.finished_at is not None
    assert deliver(factory, hook_settings, receiver, d) == "skipped"
    assert len(receiver.received) == 1


def test_a_rotated_secret_signs_beside_the_new_one(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    old = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVoxMjM0NTY="
    employer_id, _ = endpoint(factory, receiver, previous=old)
    [d] = emit(factory, employer_id)
    deliver(factory, hook_settings, receiver, d)
    [got] = receiver.received
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(got.body, got.headers)
    Webhook(SECRET).verify(got.body, got.headers)


def test_failures_follow_the_schedule_with_jitter_then_fail(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_retry_schedule=(5, 300))
    receiver.behaviour = Behaviour(status=503)
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    for step, delay in enumerate((5, 300), start=1):
        before = utcnow()
        assert deliver(factory, s, receiver, d) == "retry"
        waiting = row(factory, d)
        assert waiting.status == "pending" and waiting.step == step
        assert waiting.last_status_code == 503 and waiting.last_error == "HTTP 503"
        assert waiting.due_at is not None
        assert before + timedelta(seconds=delay) <= waiting.due_at
        assert waiting.due_at <= utcnow() + timedelta(seconds=delay * 1.1)
        assert deliver(factory, s, receiver, d) == "skipped"  # not due yet
        make_due(factory, d)
    assert deliver(factory, s, receiver, d) == "failed"
    done = row(factory, d)
    assert (done.status, done.attempts) == ("failed", 3)
    assert len(receiver.received) == 3


def test_a_redirect_is_a_failed_attempt(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=301, location="https://elsewhere.test/")
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    assert deliver(factory, hook_settings, receiver, d) == "retry"
    assert "redirects are not followed" in (row(factory, d).last_error or "")
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        (Behaviour(hang=True), "Timeout"),
        (Behaviour(drip=True), "Timeout"),
        (Behaviour(close=True), "Error"),
    ],
    ids=["hangs", "drips", "closes"],
)
def test_hostile_receivers_are_failed_attempts_within_the_limit(
    factory: sessionmaker[Session],
    hook_settings: Settings,
    receiver: Receiver,
    behaviour: Behaviour,
    error: str,
) -> None:
    receiver.behaviour = behaviour
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    assert deliver(factory, hook_settings, receiver, d, exchange_limit=2.0) == "retry"
    assert error in (row(factory, d).last_error or "")


def test_a_huge_2xx_answer_succeeds_reading_only_its_start(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=200, body_bytes=100 * 1024 * 1024)
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    assert deliver(factory, hook_settings, receiver, d, exchange_limit=5.0) == "succeeded"


def test_a_410_disables_the_endpoint_and_fails_its_pending_deliveries(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=410)
    employer_id, endpoint_id = endpoint(factory, receiver)
    first, second = emit(factory, employer_id)[0], emit(factory, employer_id)[0]
    assert deliver(factory, hook_settings, receiver, first) == "disabled"
    assert endpoint_row(factory, endpoint_id).status == "disabled"
    assert row(factory, first).status == "failed"
    other = row(factory, second)
    assert (other.status, other.last_error) == ("failed", "endpoint disabled")
    assert deliver(factory, hook_settings, receiver, second) == "skipped"
    assert emit(factory, employer_id) == []  # events while disabled make no delivery
    assert len(receiver.received) == 1


def test_five_failing_days_disable_an_endpoint(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_retry_schedule=(1,))
    receiver.behaviour = Behaviour(status=500)
    employer_id, endpoint_id = endpoint(factory, receiver, age=timedelta(days=6))
    young_employer, young = endpoint(factory, receiver)
    for who in (employer_id, young_employer):
        [d] = emit(factory, who)
        assert deliver(factory, s, receiver, d) == "retry"
        make_due(factory, d)
        assert deliver(factory, s, receiver, d) == "failed"
    assert endpoint_row(factory, endpoint_id).status == "disabled"
    assert endpoint_row(factory, young).status == "enabled"  # not failing for 5 days yet


def test_a_recent_success_keeps_a_failing_endpoint_enabled(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_retry_schedule=())
    employer_id, endpoint_id = endpoint(factory, receiver, age=timedelta(days=6))
    [ok] = emit(factory, employer_id)
    assert deliver(factory, s, receiver, ok) == "succeeded"
    receiver.behaviour = Behaviour(status=500)
    [d] = emit(factory, employer_id)
    assert deliver(factory, s, receiver, d) == "failed"
    assert endpoint_row(factory, endpoint_id).status == "enabled"
    with session_scope(factory) as x:  # the daily purge judges every endpoint too
        later = utcnow() + timedelta(days=6)
        assert deliveries.disable_failing(x, now=later, timing=delivery.timing(s)) != []
    assert endpoint_row(factory, endpoint_id).status == "disabled"


def test_dns_that_turns_private_at_send_is_refused(
    factory: sessionmaker[Session], settings: Settings, receiver: Receiver
) -> None:
    """Registered while it resolved to a public address; now it answers a private one."""
    s = dataclasses.replace(
        settings,
        secret_key=KEY.decode(),
        webhook_allow_private=False,
        webhook_allowed_ports=ANY_PORT,
    )
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    sender = client.Client(
        allowed=delivery.client_for(s).allowed, resolve=local, ssl_context=receiver.trust()
    )
    assert delivery.deliver(factory, s, d, sender=sender) == "retry"
    assert "forbidden address" in (row(factory, d).last_error or "")
    assert receiver.received == []


def test_plain_http_is_refused_at_send_without_webhook_allow_http(
    factory: sessionmaker[Session], hook_settings: Settings
) -> None:
    with receiving() as plain:
        employer_id, _ = endpoint(factory, plain)
        [d] = emit(factory, employer_id)
        assert deliver(factory, hook_settings, plain, d) == "retry"
        assert plain.received == []
        allowed = dataclasses.replace(hook_settings, webhook_allow_http=True)
        make_due(factory, d)
        assert deliver(factory, allowed, plain, d) == "succeeded"


def test_a_port_no_longer_allowed_is_refused_at_send(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    """A URL stored before the port rule, or under a wider WEBHOOK_ALLOWED_PORTS (C12)."""
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    narrow = dataclasses.replace(hook_settings, webhook_allowed_ports=())
    assert deliver(factory, narrow, receiver, d) == "retry"
    assert row(factory, d).last_error == f"Refused: port {receiver.port} is not allowed"
    assert receiver.received == []


def test_a_connection_that_fails_reads_the_same_refused_or_silent(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    """lastError does not tell which ports answer: nothing listening (refused) and a host
    that never completes the handshake (timed out) read alike (C12)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    filler = socket.create_connection(silent.getsockname())  # the backlog is full: SYNs wait
    errors = []
    try:
        for port in (closed_port, silent.getsockname()[1]):
            employer_id, endpoint_id = endpoint(factory, receiver)
            with session_scope(factory) as s:
                s.execute(
                    update(WebhookEndpoint)
                    .where(WebhookEndpoint.id == endpoint_id)
                    .values(url=f"https://hooks.test:{port}/hook")
                )
            [d] = emit(factory, employer_id)
            outcome = deliver(factory, hook_settings, receiver, d, connect_timeout=0.5)
            assert outcome == "retry"
            errors.append(row(factory, d).last_error)
    finally:
        filler.close()
        silent.close()
    assert errors == ["could not connect to the receiver"] * 2


def test_no_employer_receives_another_employers_events(
    factory: sessionmaker[Session], hook_settings: Settings, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with receiving(tmp_path / "a") as a, receiving(tmp_path / "b") as b:
        first, _ = endpoint(factory, a)
        second, _ = endpoint(factory, b)
        [d] = emit(factory, first)
        assert deliver(factory, hook_settings, a, d) == "succeeded"
        assert len(a.received) == 1 and b.received == []
        assert emit(factory, second, "job.refreshed") != []
        assert b.received == []


def test_an_endpoint_deleted_mid_delivery_breaks_nothing(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=500, delay=1.0)
    employer_id, endpoint_id = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    outcome: list[str] = []
    worker = threading.Thread(
        target=lambda: outcome.append(deliver(factory, hook_settings, receiver, d))
    )
    worker.start()
    deadline = time.monotonic() + 10
    while not receiver.received and time.monotonic() < deadline:
        time.sleep(0.02)
    with session_scope(factory) as s:
        s.delete(s.get(WebhookEndpoint, endpoint_id))
    worker.join(20)
    assert outcome == ["lost"]  # its record found nothing to change
    with factory() as s:
        assert s.get(WebhookDelivery, d) is None
    assert deliver(factory, hook_settings, receiver, d) == "skipped"


def test_the_sweeper_takes_lost_leases_and_due_deliveries_once_per_grace(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    t = delivery.timing(hook_settings)
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    with session_scope(factory) as s:  # its caller enqueued it: not within the grace
        assert d not in deliveries.sweep(s, now=utcnow(), timing=t)
    at = utcnow() + timedelta(seconds=t.sweep_grace_seconds)
    with session_scope(factory) as s:  # its message lost: the sweeper's after the grace
        assert d in deliveries.sweep(s, now=at, timing=t)
    with session_scope(factory) as s:  # enqueued just now: not again within the grace
        assert d not in deliveries.sweep(s, now=at, timing=t)
    with session_scope(factory) as s:  # a worker claims it, and dies
        assert deliveries.claim(s, d, now=utcnow(), timing=t) is not None
    later = utcnow() + timedelta(seconds=t.lease_seconds + 1)
    with session_scope(factory) as s:
        assert d in deliveries.sweep(s, now=later, timing=t)
    assert row(factory, d).status == "pending"
    with session_scope(factory) as s:
        assert deliveries.claim(s, d, now=later, timing=t) is not None


def test_a_late_outcome_after_the_lease_was_taken_over_changes_nothing(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    t = delivery.timing(hook_settings)
    employer_id, _ = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    with session_scope(factory) as s:
        first = deliveries.claim(s, d, now=utcnow(), timing=t)
    later = utcnow() + timedelta(seconds=t.lease_seconds + 1)
    with session_scope(factory) as s:
        second = deliveries.claim(s, d, now=later, timing=t)
    assert first is not None and second is not None
    with session_scope(factory) as s:
        assert deliveries.mark_succeeded(s, second, status_code=200, now=later)
    with session_scope(factory) as s:
        outcome = deliveries.mark_failed_attempt(
            s, first, error="late", status_code=500, now=later, timing=t
        )
    assert outcome == "lost" and row(factory, d).status == "succeeded"


def test_retry_sends_a_failed_delivery_with_the_schedule_anew(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_retry_schedule=())
    receiver.behaviour = Behaviour(status=500)
    employer_id, endpoint_id = endpoint(factory, receiver)
    [d] = emit(factory, employer_id)
    assert deliver(factory, s, receiver, d) == "failed"
    with factory() as x:
        message = x.scalar(
            select(deliveries.M.message_id).where(deliveries.M.id == row(factory, d).message_pk)
        )
    with session_scope(factory) as x:
        assert deliveries.retry_failed(x, endpoint_id, message, now=utcnow()) == [d]
    assert row(factory, d).lease_until is not None  # marked enqueued: its caller enqueues it
    with session_scope(factory) as x:
        assert deliveries.retry_failed(x, endpoint_id, message, now=utcnow()) == []
    receiver.behaviour = Behaviour(status=200)
    assert deliver(factory, s, receiver, d) == "succeeded"
    done = row(factory, d)
    assert (done.attempts, done.step) == (2, 0)


def test_purge_removes_finished_deliveries_past_the_retention(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    employer_id, _ = endpoint(factory, receiver)
    [done], [waiting] = emit(factory, employer_id), emit(factory, employer_id)
    assert deliver(factory, hook_settings, receiver, done) == "succeeded"
    days = hook_settings.application_retention_days
    with session_scope(factory) as s:
        assert deliveries.purge(s, now=utcnow(), retention_days=days) == 0
    with session_scope(factory) as s:
        later = utcnow() + timedelta(days=days, seconds=1)
        assert deliveries.purge(s, now=later, retention_days=days) >= 1
    with factory() as s:
        assert s.get(WebhookDelivery, done) is None
        assert s.get(WebhookDelivery, waiting) is not None


def test_counts_and_oldest_pending_age_for_the_metrics(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    employer_id, _ = endpoint(factory, receiver)
    emit(factory, employer_id)
    with factory() as s:
        assert deliveries.counts(s)["pending"] >= 1
        later = datetime.now(UTC) + timedelta(seconds=60)
        assert deliveries.oldest_pending_age(s, now=later) >= 60


def test_one_client_per_process_and_rule(hook_settings: Settings) -> None:
    """The TLS context (the system's CAs, tens of ms of CPU) is loaded once, not per
    delivery; a different address rule is a different client (C12)."""
    first = delivery.client_for(hook_settings)
    assert delivery.client_for(dataclasses.replace(hook_settings)) is first
    other = dataclasses.replace(
        hook_settings, webhook_allow_private=not hook_settings.webhook_allow_private
    )
    assert delivery.client_for(other) is not first
    assert first.allowed("10.0.0.1") is hook_settings.webhook_allow_private


# --- no tenant starves another: the caps of deliveries in flight (C12) -------------------


def hold(factory: sessionmaker[Session], s: Settings, delivery_id: int) -> Any:
    """Claim a delivery as a worker sending it would, and keep it in flight."""
    with session_scope(factory) as session:
        got = deliveries.claim(session, delivery_id, now=utcnow(), timing=delivery.timing(s))
    assert got is not None
    return got


def test_an_endpoint_with_its_cap_in_flight_defers_the_next_without_an_attempt(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    employer_id, _ = endpoint(factory, receiver)
    ids = [emit(factory, employer_id)[0] for _ in range(3)]
    first = hold(factory, hook_settings, ids[0])
    hold(factory, hook_settings, ids[1])  # two in flight: WEBHOOK_ENDPOINT_IN_FLIGHT's default
    before = REGISTRY.get_sample_value("jobpost_webhook_deferred_total") or 0
    assert deliver(factory, hook_settings, receiver, ids[2]) == "deferred"
    assert REGISTRY.get_sample_value("jobpost_webhook_deferred_total") == before + 1
    assert receiver.received == []
    waiting = row(factory, ids[2])
    assert (waiting.status, waiting.attempts, waiting.last_error) == ("pending", 0, None)
    with session_scope(factory) as s:
        assert deliveries.mark_succeeded(s, first, status_code=204, now=utcnow())
    assert deliver(factory, hook_settings, receiver, ids[2]) == "succeeded"
    assert row(factory, ids[2]).attempts == 1


def test_an_employer_with_its_cap_in_flight_defers_even_where_an_endpoint_has_room(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_employer_in_flight=3)
    employer_id, one = endpoint(factory, receiver)
    _, two = endpoint(factory, receiver, employer_id=employer_id)
    first, second = emit(factory, employer_id), emit(factory, employer_id)  # one for each
    at = {d: row(factory, d).endpoint_id for d in first + second}
    [a1, b1], [a2, b2] = (sorted(m, key=lambda d: at[d] != one) for m in (first, second))
    for d in (a1, a2, b1):  # the first endpoint full, the second with one of its two
        hold(factory, s, d)
    assert at[b2] == two
    assert deliver(factory, s, receiver, b2) == "deferred"
    _, other = endpoint(factory, receiver)  # another employer is not held back
    [theirs] = emit(factory, endpoint_row(factory, other).employer_id)
    assert deliver(factory, s, receiver, theirs) == "succeeded"
    assert len(receiver.received) == 1


@pytest.mark.parametrize("statements", ["transaction", "autocommit"])
def test_claims_at_once_never_pass_the_caps(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver, statements: str
) -> None:
    """Twenty claims of one employer's deliveries at the same instant, each on a connection
    of its own, as from twenty worker processes: eight win, at most two an endpoint; in a
    transaction, and each claim its own statement as the workers run it."""
    sessions = factory if statements == "transaction" else autocommit_sessions(factory)
    employer_id, _ = endpoint(factory, receiver)
    for _ in range(4):
        endpoint(factory, receiver, employer_id=employer_id)
    ids = [d for _ in range(4) for d in emit(factory, employer_id)]
    assert len(ids) == 20
    start = threading.Barrier(len(ids))
    won: list[Any] = []

    def claim(d: int) -> None:
        start.wait()
        with session_scope(sessions) as session:
            got = deliveries.claim(session, d, now=utcnow(), timing=delivery.timing(hook_settings))
        if got is not None:
            won.append(got)

    threads = [threading.Thread(target=claim, args=(d,)) for d in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(won) == 8
    per_endpoint = [sum(1 for w in won if w.endpoint_id == e) for e in {w.endpoint_id for w in won}]
    assert max(per_endpoint) <= 2


def test_an_attempt_that_ends_hands_on_the_delivery_waiting_for_its_place(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    s = dataclasses.replace(hook_settings, webhook_endpoint_in_flight=1)
    employer_id, _ = endpoint(factory, receiver)
    ids = [emit(factory, employer_id)[0] for _ in range(3)]
    held = hold(factory, s, ids[1])
    assert deliver(factory, s, receiver, ids[2]) == "deferred"
    with session_scope(factory) as session:
        deliveries.mark_succeeded(session, held, status_code=204, now=utcnow())
    handed: list[list[int]] = []
    sent = delivery.deliver(factory, s, ids[0], sender=sender_for(receiver), hand_on=handed.append)
    assert sent == "succeeded"
    assert handed == [[ids[2]]]
    assert row(factory, ids[2]).lease_until is not None  # marked enqueued: not handed twice
    assert delivery.deliver(factory, s, ids[2], sender=sender_for(receiver)) == "succeeded"


def test_a_success_with_nothing_of_its_employer_waiting_makes_no_hand_on_query(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    """Another employer's delivery waits; on PostgreSQL the mark itself tells that none of
    this employer's does: two statements, the claim and the mark."""
    s = dataclasses.replace(hook_settings, webhook_endpoint_in_flight=1)
    other, _ = endpoint(factory, receiver)
    theirs = [emit(factory, other)[0] for _ in range(2)]
    hold(factory, s, theirs[0])
    assert deliver(factory, s, receiver, theirs[1]) == "deferred"
    mine, _ = endpoint(factory, receiver)
    [d] = emit(factory, mine)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    handed: list[list[int]] = []
    event.listen(Engine, "before_cursor_execute", count)
    try:
        sent = delivery.deliver(factory, s, d, sender=sender_for(receiver), hand_on=handed.append)
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert (sent, handed) == ("succeeded", [])
    if factory.kw["bind"].dialect.name == "postgresql":
        assert len(statements) == 2, statements


def test_deliveries_their_caller_enqueued_are_not_handed_on_again(
    factory: sessionmaker[Session], hook_settings: Settings, receiver: Receiver
) -> None:
    """The broker holds them already: a hand-on would send each a second task."""
    employer_id, _ = endpoint(factory, receiver)
    ids = emit(factory, employer_id) + emit(factory, employer_id)
    handed: list[list[int]] = []
    first = delivery.deliver(
        factory, hook_settings, ids[0], sender=sender_for(receiver), hand_on=handed.append
    )
    assert first == "succeeded"
    assert handed == []
