"""C12: `application.received`, written in the application's own transaction, its
deliveries enqueued after commit; only the job's employer hears it. Both backends."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import WebhookDelivery, WebhookEndpoint, WebhookMessage
from tests.conftest import Account, Api
from tests.factories import create_job

API = "/api/v1.1"
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"


@pytest.fixture
def hooked() -> list[list[int]]:
    return []


@pytest.fixture
def app(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, hooked: list[list[int]]
) -> WsgiApp:
    parts = Collaborators(limiter=ratelimit.Unlimited(), enqueue_webhooks=hooked.append)
    return create_app(settings, sessions, parts, today=clock)


def endpoint(sessions: sessionmaker[Session], owner: int, events: str = '["*"]') -> int:
    with sessions() as s:
        row = WebhookEndpoint(
            employer_id=owner,
            url="https://hooks.example/x",
            events=events,
            status="enabled",
            secret="sealed",
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        s.add(row)
        s.commit()
        return row.id


def messages(sessions: sessionmaker[Session]) -> list[tuple[int, dict[str, Any]]]:
    with sessions() as s:
        rows = s.execute(select(WebhookMessage.employer_id, WebhookMessage.payload))
        return [(owner, json.loads(payload)) for owner, payload in rows]


def apply(api: Api, job_id: int, **extra: Any) -> int:
    document = {"name": "Ada", "email": "ada@example.com", **extra}
    result = api.post(f"{API}/jobs/{job_id}/applications", json=document)
    assert result.status_code == 202, result.text
    app_id: int = result.json["id"]
    return app_id


def test_an_application_emits_the_employers_view_with_its_resume_url(
    api: Api, employer: Account, sessions: sessionmaker[Session], hooked: list[list[int]]
) -> None:
    endpoint(sessions, employer.id, '["application.received"]')
    job = create_job(api, employer, status="active")
    resume = {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()}
    app_id = apply(api, job["id"], resume=resume)
    [(owner, message)] = messages(sessions)
    assert owner == employer.id and message["type"] == "application.received"
    view = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    data = message["data"]
    assert data["resumeUrl"] == f"http://127.0.0.1:8000{API}/applications/{app_id}/resume"
    assert {k: v for k, v in data.items() if k != "resumeUrl"} == {
        **view,
        "status": "pending",
        "attempts": 0,
        "sentAt": None,
        "lastError": None,
    }
    with sessions() as s:
        [delivery] = s.scalars(select(WebhookDelivery.id)).all()
    assert hooked == [[delivery]]


def test_without_a_resume_the_url_is_null_and_public_base_url_is_used(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    employer: Account,
) -> None:
    based = dataclasses.replace(settings, public_base_url="https://jobs.example")
    api = Api(
        create_app(based, sessions, Collaborators(limiter=ratelimit.Unlimited()), today=clock)
    )
    endpoint(sessions, employer.id)
    job = create_job(api, employer, status="active")
    apply(api, job["id"])
    resume = {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()}
    with_resume = apply(api, job["id"], resume=resume)
    received = [m for _, m in messages(sessions) if m["type"] == "application.received"]
    urls = sorted(m["data"]["resumeUrl"] or "" for m in received)  # job.created aside (C12)
    assert urls == ["", f"https://jobs.example{API}/applications/{with_resume}/resume"]


def test_no_other_employer_hears_an_application(
    api: Api,
    employer: Account,
    make_employer: Any,
    sessions: sessionmaker[Session],
    hooked: list[list[int]],
) -> None:
    other = make_employer("Other Co")
    endpoint(sessions, other.id)
    job = create_job(api, employer, status="active")
    apply(api, job["id"])
    assert messages(sessions) == [] and hooked == []


def test_an_endpoint_not_taking_the_type_gets_nothing(
    api: Api, employer: Account, sessions: sessionmaker[Session], hooked: list[list[int]]
) -> None:
    endpoint(sessions, employer.id, '["job.expired"]')
    job = create_job(api, employer, status="active")
    apply(api, job["id"])
    assert messages(sessions) == [] and hooked == []
