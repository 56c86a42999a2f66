"""emit and emit_batch (C12): one message per event, one delivery per enabled endpoint of the
employer that subscribes to its type; none for disabled endpoints or other employers; a
fixed number of statements per batch; `webhook.test` to the endpoint tested only."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session

from models.db.entities import WebhookDelivery, WebhookEndpoint, WebhookMessage
from models.employers import create_employer
from models.webhooks import messages as webhook_messages

NOW = datetime(2026, 3, 10, 12, 0, 0, 123456, tzinfo=UTC)


def endpoint(s: Session, employer_id: int, events: list[str], status: str = "enabled") -> int:
    row = WebhookEndpoint(
        employer_id=employer_id,
        url="https://hooks.example.com/in",
        events=webhook_messages.events_json(events),
        status=status,
        secret="token",
        created_at=NOW,
        updated_at=NOW,
    )
    s.add(row)
    s.flush()
    return row.id


def deliveries(s: Session, message_id: str) -> list[int]:
    found = s.scalars(
        select(WebhookDelivery.endpoint_id)
        .join(WebhookMessage, WebhookMessage.id == WebhookDelivery.message_pk)
        .where(WebhookMessage.message_id == message_id)
        .order_by(WebhookDelivery.endpoint_id)
    )
    return list(found)


def test_one_delivery_per_subscribed_enabled_endpoint_of_the_employer(session: Session) -> None:
    mine, other = create_employer(session, "Maple").id, create_employer(session, "Birch").id
    everything = endpoint(session, mine, ["*"])
    expiries = endpoint(session, mine, ["job.expired", "job.refreshed"])
    endpoint(session, mine, ["application.received"])  # another type
    endpoint(session, mine, ["*"], status="disabled")
    endpoint(session, other, ["*"])  # another employer's
    message = webhook_messages.emit(session, mine, "job.expired", {"id": 7}, now=NOW)
    assert message.startswith("msg_")
    assert deliveries(session, message) == [everything, expiries]
    row = session.scalars(select(WebhookMessage).where(WebhookMessage.message_id == message)).one()
    assert (row.employer_id, row.type) == (mine, "job.expired")
    assert json.loads(row.payload) == {
        "type": "job.expired",
        "timestamp": "2026-03-10T12:00:00.123Z",
        "data": {"id": 7},
    }
    pending = session.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)).all()
    assert [(d.status, d.attempts, d.step, d.due_at) for d in pending] == [
        ("pending", 0, 0, NOW)
    ] * 2
    assert [d.lease_until for d in pending] == [None, None]  # no caller's: the sweeper's
    later = NOW + timedelta(seconds=1)
    assert webhook_messages.pending_of(session, [message], now=later) == [d.id for d in pending]
    session.expire_all()
    marked = session.scalars(select(WebhookDelivery.lease_until).order_by(WebhookDelivery.id))
    assert list(marked) == [later, later]  # enqueued by the caller: handed on by no one


def test_no_endpoint_to_receive_it_writes_nothing(session: Session) -> None:
    mine = create_employer(session, "Maple").id
    endpoint(session, mine, ["job.expired"], status="disabled")
    endpoint(session, mine, ["job.refreshed"])
    webhook_messages.emit(session, mine, "job.expired", {"id": 7}, now=NOW)
    assert session.scalars(select(WebhookMessage)).all() == []
    assert session.scalars(select(WebhookDelivery)).all() == []


def test_a_type_is_matched_whole_not_as_part_of_another(session: Session) -> None:
    mine = create_employer(session, "Maple").id
    endpoint(session, mine, ["job.expiring"])
    assert webhook_messages.emit_batch(session, "job.expired", [(mine, {})], now=NOW) == []


def test_webhook_test_goes_to_the_endpoint_tested_only(session: Session) -> None:
    mine, other = create_employer(session, "Maple").id, create_employer(session, "Birch").id
    tested = endpoint(session, mine, ["job.expired"])  # not subscribed to webhook.test
    endpoint(session, mine, ["*"])
    theirs = endpoint(session, other, ["*"])
    message = webhook_messages.emit(
        session, mine, webhook_messages.TEST, {"webhookId": tested}, endpoint_id=tested, now=NOW
    )
    assert deliveries(session, message) == [tested]
    # Another employer's endpoint is never a target, even named.
    stray = webhook_messages.emit(
        session, mine, webhook_messages.TEST, {}, endpoint_id=theirs, now=NOW
    )
    assert deliveries(session, stray) == []
    disabled = endpoint(session, mine, ["*"], status="disabled")
    assert (
        deliveries(
            session,
            webhook_messages.emit(
                session, mine, webhook_messages.TEST, {}, endpoint_id=disabled, now=NOW
            ),
        )
        == []
    )


def test_a_batch_takes_three_statements_whatever_its_size(session: Session, engine: Engine) -> None:
    employers = [create_employer(session, f"E{n}").id for n in range(6)]
    for n, employer in enumerate(employers):
        endpoint(session, employer, ["*"] if n % 2 else ["job.refreshed"])
    endpoint(session, employers[0], ["job.refreshed"], status="disabled")
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        events = [(employer, {"id": job}) for job in range(20) for employer in employers]
        ids = webhook_messages.emit_batch(session, "job.refreshed", events, now=NOW)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == 3  # executemany of the messages is one
    assert len(ids) == len(set(ids)) == 120
    assert session.query(WebhookDelivery).count() == 120


def test_the_body_holds_dates_amounts_and_times_in_the_service_format(session: Session) -> None:
    mine = create_employer(session, "Maple").id
    endpoint(session, mine, ["*"])
    data = {"closeDate": date(2026, 4, 1), "amount": Decimal("60000.50"), "at": NOW}
    [message] = webhook_messages.emit_batch(session, "job.expiring", [(mine, data)], now=NOW)
    payload = session.scalars(
        select(WebhookMessage.payload).where(WebhookMessage.message_id == message)
    ).one()
    assert json.loads(payload)["data"] == {
        "closeDate": "2026-04-01",
        "amount": 60000.5,
        "at": "2026-03-10T12:00:00.123Z",
    }


def test_subscribes() -> None:
    assert webhook_messages.subscribes('["*"]', "job.expired")
    assert webhook_messages.subscribes('["job.expired"]', "job.expired")
    assert not webhook_messages.subscribes('["job.expiring"]', "job.expired")
