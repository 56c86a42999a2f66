"""The caps' counts read only what is in flight or waiting (C12, migration 0027): right answers
would not show a lost index, the plan does. A backlog at one endpoint with a long history, on
PostgreSQL; a database of the module's own, as ANALYZE changes PostgreSQL's row counts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert
from sqlalchemy.orm import Session

from models.db.entities import WebhookDelivery, WebhookMessage
from models.employers import create_employer
from models.webhooks import delivery
from tests.conftest import migrated
from tests.models.webhooks.test_webhook_emit import endpoint
from tests.plans import explained

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
TIMING = delivery.Timing(lease_seconds=60, endpoint_in_flight=16, employer_in_flight=16)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    with migrated(request.param, tmp_path_factory.mktemp("delivery-plans")) as eng:
        yield eng


def _backlog(session: Session) -> tuple[int, list[int]]:
    """An endpoint with 3,000 finished deliveries, 16 sending, 1,000 pending in the broker
    and 20 waiting for a place (deferred: pending, out of the broker); its id and the
    waiting ones' ids."""
    employer = create_employer(session, "Maple").id
    hooks = endpoint(session, employer, ["*"])
    message = WebhookMessage(
        message_id="msg_1", employer_id=employer, type="job.expired", payload="{}", created_at=NOW
    )
    session.add(message)
    session.flush()

    def rows(n: int, **values: Any) -> list[dict[str, Any]]:
        common = {"message_pk": message.id, "endpoint_id": hooks, "created_at": NOW}
        return [{**common, **values} for _ in range(n)]

    session.execute(insert(WebhookDelivery), rows(3000, status="succeeded", finished_at=NOW))
    lease = NOW + timedelta(seconds=60)
    session.execute(insert(WebhookDelivery), rows(16, status="sending", lease_until=lease))
    session.execute(insert(WebhookDelivery), rows(1000, status="pending", lease_until=NOW))
    session.execute(insert(WebhookDelivery), rows(20, status="pending", lease_until=None))
    session.flush()
    waiting = session.query(WebhookDelivery.id).filter(
        WebhookDelivery.status == "pending", WebhookDelivery.lease_until.is_(None)
    )
    if session.connection().dialect.name == "postgresql":
        session.connection().exec_driver_sql("ANALYZE webhook_deliveries")
    return hooks, sorted(i for (i,) in waiting)


def test_a_full_endpoint_hands_on_nothing_reading_only_what_is_in_flight(
    session: Session,
) -> None:
    hooks, _waiting = _backlog(session)
    found, plan = explained(
        session, lambda: delivery.next_waiting(session, hooks, now=NOW, timing=TIMING)
    )
    assert found is None  # 16 in flight: the cap is full
    if plan:
        text = "\n".join(plan)
        assert "ix_webhook_deliveries_sending" in text, text


def test_a_freed_place_hands_on_the_oldest_waiting_from_their_index(session: Session) -> None:
    hooks, waiting = _backlog(session)
    roomy = delivery.Timing(lease_seconds=60, endpoint_in_flight=17, employer_in_flight=17)
    found, plan = explained(
        session, lambda: delivery.next_waiting(session, hooks, now=NOW, timing=roomy)
    )
    assert found == waiting[0]
    if plan:
        text = "\n".join(plan)
        assert "ix_webhook_deliveries_waiting" in text, text
        assert "ix_webhook_deliveries_sending" in text, text
