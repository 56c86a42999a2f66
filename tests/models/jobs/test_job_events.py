"""C12's job events from upkeep: `job.expired` and `job.refreshed` written in the same
transaction as the set-based change, in a fixed number of statements per batch, and the
daily `job.expiring` scan at most once per job and closeDate. Both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.db.entities import Job, WebhookDelivery, WebhookEndpoint, WebhookMessage
from models.jobs import upkeep

TODAY = date(2026, 3, 10)
DAY = timedelta(days=1)
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


def employer(sessions: sessionmaker[Session], plan: str = "unlimited") -> int:
    with sessions() as s:
        found = employers.create_employer(s, f"Events {plan}", plan)
        s.commit()
        return found.id


def hook(
    sessions: sessionmaker[Session], owner: int, events: str = '["*"]', status: str = "enabled"
) -> int:
    with sessions() as s:
        row = WebhookEndpoint(
            employer_id=owner,
            url="https://hooks.example/x",
            events=events,
            status=status,
            secret="sealed",
            created_at=NOW,
            updated_at=NOW,
        )
        s.add(row)
        s.commit()
        return row.id


def job(
    sessions: sessionmaker[Session],
    owner: int,
    *,
    close: date,
    publish: date = TODAY - 30 * DAY,
    auto_refresh: bool = False,
) -> int:
    with sessions() as s:
        row = Job(
            employer_id=owner,
            title="Baker",
            search_text="baker",
            publish_date=publish,
            close_date=close,
            status="active",
            auto_refresh=auto_refresh,
            confidential=False,
            salary_commission=False,
            position_type_id=1,
            description="<p>Bake.</p>",
            routing_type=1,
            application_email="jobs@events.test",
            updated_at=NOW,
            reference_id=f"ref-{close.isoformat()}-{publish.isoformat()}",
        )
        s.add(row)
        s.commit()
        return row.id


def messages(sessions: sessionmaker[Session], type: str) -> list[dict[str, Any]]:
    with sessions() as s:
        rows = s.scalars(select(WebhookMessage.payload).where(WebhookMessage.type == type))
        return [json.loads(p) for p in rows]


def delivery_count(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return len(s.scalars(select(WebhookDelivery.id)).all())


@contextmanager
def statements(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    seen: list[str] = []
    bind = sessions.kw["bind"]
    engine = bind.engine

    def note(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def test_expiry_emits_job_expired_with_the_list_element_and_close_date(
    sessions: sessionmaker[Session],
) -> None:
    owner = employer(sessions)
    hook(sessions, owner)
    closed = job(sessions, owner, close=TODAY - DAY)
    job(sessions, owner, close=TODAY + 10 * DAY)
    with sessions() as s:
        assert upkeep.expire(s, today=TODAY) == 1
        s.commit()
    [message] = messages(sessions, "job.expired")
    assert message["type"] == "job.expired" and message["timestamp"].endswith("Z")
    data = message["data"]
    assert data["id"] == closed and data["status"] == "archived"
    assert data["closeDate"] == (TODAY - DAY).isoformat()
    assert data["employer"] == {"id": owner, "name": "Events unlimited"}
    assert data["publishDate"] == (TODAY - 30 * DAY).isoformat()
    assert {"referenceId", "title", "locations", "confidential"} <= set(data)
    assert delivery_count(sessions) == 1


def test_expiry_costs_the_same_statements_for_three_jobs_or_thirty(
    sessions: sessionmaker[Session],
) -> None:
    counts = []
    for n, day in ((3, TODAY), (30, TODAY + 100 * DAY)):
        owner = employer(sessions)
        hook(sessions, owner)
        for i in range(n):
            job(sessions, owner, close=day - DAY, publish=day - (40 + i) * DAY)
        with statements(sessions) as seen, sessions() as s:
            assert upkeep.expire(s, today=day) == n
            s.commit()
        counts.append(len(seen))
    assert counts[0] == counts[1]


def test_no_event_for_employers_without_a_listening_enabled_endpoint(
    sessions: sessionmaker[Session],
) -> None:
    deaf, disabled, other = employer(sessions), employer(sessions), employer(sessions)
    hook(sessions, disabled, status="disabled")
    hook(sessions, other, events='["job.refreshed"]')
    for owner in (deaf, disabled, other):
        job(sessions, owner, close=TODAY - DAY)
    with sessions() as s:
        assert upkeep.expire(s, today=TODAY) == 3
        s.commit()
    assert messages(sessions, "job.expired") == []
    assert delivery_count(sessions) == 0


def test_refresh_emits_job_refreshed_to_its_employer_only(
    sessions: sessionmaker[Session],
) -> None:
    owner, neighbour = employer(sessions), employer(sessions)
    hook(sessions, owner, events='["job.refreshed"]')
    neighbours_hook = hook(sessions, neighbour)
    refreshed = job(sessions, owner, close=TODAY + 20 * DAY, auto_refresh=True)
    with sessions() as s:
        assert upkeep.refresh(s, today=TODAY) == 1
        s.commit()
    [message] = messages(sessions, "job.refreshed")
    assert message["data"]["id"] == refreshed
    assert message["data"]["publishDate"] == TODAY.isoformat()
    assert "closeDate" not in message["data"]
    with sessions() as s:
        to = s.scalars(select(WebhookDelivery.endpoint_id)).all()
    assert neighbours_hook not in to


def test_the_expiring_scan_emits_once_per_job_and_close_date(
    sessions: sessionmaker[Session],
) -> None:
    owner = employer(sessions)
    hook(sessions, owner, events='["job.expiring"]')
    today = job(sessions, owner, close=TODAY)
    in_three = job(sessions, owner, close=TODAY + 3 * DAY)
    job(sessions, owner, close=TODAY + 5 * DAY)  # past today+3, even on the next day
    for _ in range(2):  # a second scan (or a second day) emits nothing new
        with sessions() as s:
            upkeep.scan_expiring(s, today=TODAY)
            s.commit()
    found = {(m["data"]["id"], m["data"]["closeDate"]) for m in messages(sessions, "job.expiring")}
    assert found == {(today, TODAY.isoformat()), (in_three, (TODAY + 3 * DAY).isoformat())}
    assert len(messages(sessions, "job.expiring")) == 2
    with sessions() as s:  # a new closeDate is a new occasion
        moved = s.get(Job, in_three)
        assert moved is not None
        moved.close_date = TODAY + 2 * DAY
        s.commit()
    with sessions() as s:
        upkeep.scan_expiring(s, today=TODAY + DAY)
        s.commit()
    assert len(messages(sessions, "job.expiring")) == 3


def test_the_refresh_task_runs_expiry_refresh_then_the_scan(
    sessions: sessionmaker[Session],
) -> None:
    owner = employer(sessions)
    hook(sessions, owner)
    job(sessions, owner, close=TODAY - DAY)  # expired: never "expiring"
    soon = job(sessions, owner, close=TODAY + DAY)
    done = upkeep.expire_and_refresh(sessions, today=TODAY)
    assert (done.expired, done.expiring) == (1, 1)
    [expiring] = messages(sessions, "job.expiring")
    assert expiring["data"]["id"] == soon
