"""C12, C14: `jobpost webhooks deliveries WEBHOOK_ID` and `jobpost webhooks retry WEBHOOK_ID
MESSAGE_ID|--all-failed`, on a copy of the migrated database and the embedded broker."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.dates import utcnow
from models.db.entities import WebhookDelivery, WebhookEndpoint
from models.db.unit_of_work import session_scope
from models.webhooks import messages as webhook_messages
from workers.cli import main

pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


def endpoint_with(sessions: sessionmaker[Session], *statuses: str) -> tuple[int, list[str]]:
    """An endpoint with a delivery of each status, oldest first; their message ids."""
    with session_scope(sessions) as s:
        owner = employers.create_employer(s, "Hooks Ltd").id
        hook = WebhookEndpoint(
            employer_id=owner,
            url="https://hooks.example/x",
            events='["*"]',
            status="enabled",
            secret="sealed",
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        s.add(hook)
        s.flush()
        ids = []
        for status in statuses:
            message = webhook_messages.emit(s, owner, "job.expired", {"id": 1}, now=utcnow())
            made = webhook_messages.pending_of(s, [message], now=utcnow())
            s.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.id.in_(made))
                .values(status=status, attempts=1, last_error="HTTP 500", last_status_code=500)
            )
            ids.append(message)
        return hook.id, ids


def statuses(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as s:
        return list(s.scalars(select(WebhookDelivery.status).order_by(WebhookDelivery.id)))


def test_deliveries_prints_the_api_shapes_newest_first(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    hook, [first, second] = endpoint_with(copy, "failed", "succeeded")
    assert main(["webhooks", "deliveries", str(hook), "--json"]) == 0
    printed = orjson.loads(capsys.readouterr().out)
    assert [d["id"] for d in printed["data"]] == [second, first]
    assert set(printed["data"][0]) == {
        "id",
        "event",
        "status",
        "attempts",
        "lastStatusCode",
        "lastError",
        "createdAt",
        "deliveredAt",
    }
    assert main(["webhooks", "deliveries", str(hook)]) == 0
    assert first in capsys.readouterr().out


def test_retry_one_failed_delivery_and_refuse_one_that_did_not_fail(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    hook, [failed, succeeded] = endpoint_with(copy, "failed", "succeeded")
    assert main(["webhooks", "retry", str(hook), failed, "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"retried": 1, "enqueued": 1}
    assert statuses(copy) == ["pending", "succeeded"]
    assert main(["webhooks", "retry", str(hook), succeeded]) == 1
    assert "has not failed" in capsys.readouterr().err


def test_retry_all_failed(copy: sessionmaker[Session], capsys: Any) -> None:
    hook, _ = endpoint_with(copy, "failed", "failed", "cancelled")
    assert main(["webhooks", "retry", str(hook), "--all-failed", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"retried": 2, "enqueued": 2}
    assert statuses(copy) == ["pending", "pending", "cancelled"]


def test_an_unknown_webhook_is_one_line(copy: sessionmaker[Session], capsys: Any) -> None:
    assert main(["webhooks", "deliveries", "999"]) == 1
    assert capsys.readouterr().err.strip() == "jobpost: no webhook 999"
