"""`job.created`, `job.updated` and `job.deleted` (C12): emitted in the write's transaction,
to the endpoints that take them; `job.updated` with the members that changed; a sync run's
a batch at a time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session, sessionmaker

from models.core.settings import Settings
from models.db.entities import WebhookDelivery, WebhookMessage
from tests.api.test_syncs import SYNCS, item, run_it
from tests.api.test_webhooks import Hooks, build, register
from tests.conftest import Account, Clock
from tests.factories import JOBS, job_body, read_shape


@pytest.fixture
def hooks(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> Hooks:
    return build(settings, sessions, clock)


def sent(hooks: Hooks) -> list[tuple[str, dict[str, Any]]]:
    """Every message written, oldest first: (type, data)."""
    with hooks.sessions() as s:
        rows = s.scalars(select(WebhookMessage).order_by(WebhookMessage.id)).all()
        return [(r.type, json.loads(r.payload)["data"]) for r in rows]


def element(hooks: Hooks, account: Account, job_id: int) -> dict[str, Any]:
    """The job's list element, as the API lists it."""
    listed = hooks.api.get(JOBS, key=account.key, params={"pageSize": 100}).json["data"]
    found: dict[str, Any] = next(j for j in listed if j["id"] == job_id)
    return found


def test_a_post_sends_job_created_with_the_list_element_enqueued_after_commit(
    hooks: Hooks, employer: Account
) -> None:
    register(hooks, employer.key)
    created = hooks.api.post(JOBS, key=employer.key, json=job_body(referenceId="W-1"))
    job_id = created.json["id"]
    assert sent(hooks) == [("job.created", element(hooks, employer, job_id))]
    with hooks.sessions() as s:
        delivery = s.scalars(select(WebhookDelivery)).one()
    assert hooks.enqueued == [[delivery.id]]


def test_a_put_sends_job_updated_with_what_changed_and_an_unchanged_one_nothing(
    hooks: Hooks, employer: Account
) -> None:
    job = read_shape(hooks.api.post(JOBS, key=employer.key, json=job_body()).json)
    register(hooks, employer.key)
    path = f"{JOBS}/{job['id']}"
    change = {"title": "Head baker", "locations": [{"description": "Ottawa, ON"}]}
    written = hooks.api.put(path, key=employer.key, json=change)
    assert written.status_code == 200
    hooks.api.put(path, key=employer.key, json=change)  # unchanged: no event
    [(kind, data)] = sent(hooks)
    assert kind == "job.updated"
    assert data == {
        **element(hooks, employer, job["id"]),
        "changes": [
            {"field": "title", "from": "Senior Baker", "to": "Head baker"},
            {"field": "locations", "from": job["locations"], "to": written.json["locations"]},
        ],
    }


def test_put_by_reference_id_sends_created_then_updated(hooks: Hooks, employer: Account) -> None:
    register(hooks, employer.key)
    first = hooks.api.put(JOBS, key=employer.key, json=job_body(referenceId="R-1"))
    hooks.api.put(JOBS, key=employer.key, json={"referenceId": "R-1", "categories": [{"id": 1}]})
    kinds = [(k, d.get("changes")) for k, d in sent(hooks)]
    assert kinds == [
        ("job.created", None),
        (
            "job.updated",
            [
                {
                    "field": "categories",
                    "from": first.json["categories"],
                    "to": [{"id": 1, "name": "Accounting & Finance"}],
                }
            ],
        ),
    ]


def test_a_delete_sends_job_deleted_with_the_feeds_tombstone(
    hooks: Hooks, employer: Account
) -> None:
    a = hooks.api.post(JOBS, key=employer.key, json=job_body(referenceId="D-1")).json
    b = hooks.api.post(JOBS, key=employer.key, json=job_body()).json
    register(hooks, employer.key, events=["job.deleted"])
    hooks.api.delete(JOBS, key=employer.key, json={"referenceId": "D-1"})
    hooks.api.delete(f"{JOBS}/{b['id']}", key=employer.key)
    [(k1, d1), (k2, d2)] = sent(hooks)
    assert (k1, k2) == ("job.deleted", "job.deleted")
    assert d1 == {
        "id": a["id"],
        "referenceId": "D-1",
        "deleted": True,
        "updatedAt": d1["updatedAt"],
    }
    assert d2["id"] == b["id"] and d2["referenceId"] is None and d2["deleted"] is True
    assert len(hooks.enqueued) == 2


def test_only_the_events_an_endpoint_takes_are_written(hooks: Hooks, employer: Account) -> None:
    register(hooks, employer.key, events=["job.updated"])
    job = hooks.api.post(JOBS, key=employer.key, json=job_body()).json
    hooks.api.put(f"{JOBS}/{job['id']}", key=employer.key, json={"title": "Baker"})
    hooks.api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    assert [k for k, _d in sent(hooks)] == ["job.updated"]


def test_dry_runs_refused_writes_and_employers_without_endpoints_send_nothing(
    hooks: Hooks, employer: Account, make_employer: Any
) -> None:
    register(hooks, employer.key)
    hooks.api.post(JOBS + "?dryRun=true", key=employer.key, json=job_body())
    assert hooks.api.post(JOBS, key=employer.key, json={"title": ""}).status_code == 422
    other = make_employer("Quiet Corp")
    hooks.api.post(JOBS, key=other.key, json=job_body())
    assert sent(hooks) == [] and hooks.enqueued == []


def test_a_sync_run_sends_its_batch_of_events_in_one_statement_a_type(
    hooks: Hooks, employer: Account, sessions: sessionmaker[Session], settings: Settings
) -> None:
    register(hooks, employer.key)
    hooks.api.put(JOBS, key=employer.key, json=job_body(referenceId="S-0"))
    jobs = [{"referenceId": "S-0", "title": "Changed"}, *(item(f"S-{n}") for n in range(1, 6))]
    body = {"mode": "upsert", "jobs": jobs}
    run = hooks.api.post(SYNCS, key=employer.key, json=body).json
    inserts: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO WEBHOOK_MESSAGES"):
            inserts.append(statement)

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert run_it(sessions, settings, run["id"]) == "completed"
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    kinds = [k for k, _d in sent(hooks)]
    assert kinds == ["job.created", *["job.created"] * 5, "job.updated", "sync.completed"]
    assert len(inserts) == 3, inserts  # the batch's creates, its update, then sync.completed
    updated = [d for k, d in sent(hooks) if k == "job.updated"]
    assert updated[0]["changes"] == [{"field": "title", "from": "Senior Baker", "to": "Changed"}]
