"""C9 `PUBLIC_BASE_URL`: the absolute URLs the service hands out or stores (Location, paging
links, the job page's canonical address, the `application.received` payload's resumeUrl)
name PUBLIC_BASE_URL, else the address the server listens on (api.server.listen_url);
never the request's Host, X-Forwarded-Host or Forwarded. Both backends."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, create_app
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import WebhookEndpoint, WebhookMessage
from tests.conftest import Account, Api
from tests.factories import job_body

API = "/api/v1.1"
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
LISTENING = "http://127.0.0.1:8123"  # what `jobpost serve --port 8123` tells the app
FORGED = {
    "Host": "attacker.test",
    "X-Forwarded-Host": "attacker.test",
    "X-Forwarded-Proto": "https",
    "Forwarded": "host=attacker.test;proto=https",
}


@pytest.fixture(params=[None, "https://jobs.example.test"], ids=["listen-address", "public"])
def public(request: pytest.FixtureRequest) -> str | None:
    value: str | None = request.param
    return value


@pytest.fixture
def app(settings: Settings, sessions: sessionmaker[Session], clock: Any, public: str | None) -> Any:
    parts = Collaborators(limiter=ratelimit.Unlimited(), listen_url=LISTENING)
    based = dataclasses.replace(settings, public_base_url=public)
    return create_app(based, sessions, parts, today=clock)


def hook(sessions: sessionmaker[Session], employer_id: int) -> None:
    with sessions() as s:
        now = utcnow()
        s.add(
            WebhookEndpoint(
                employer_id=employer_id,
                url="https://hooks.example/in",
                events='["application.received"]',
                status="enabled",
                secret="sealed",
                created_at=now,
                updated_at=now,
            )
        )
        s.commit()


def test_a_forged_host_names_nothing_the_service_hands_out_or_stores(
    app: Any,
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    public: str | None,
) -> None:
    base = public or LISTENING
    hook(sessions, employer.id)
    ids = []
    for _ in range(2):
        created = api.post(
            f"{API}/jobs", json=job_body(status="active"), key=employer.key, headers=FORGED
        )
        assert created.status_code == 201, created.text
        ids.append(created.json["id"])
        assert created.headers["location"] == f"{base}{API}/jobs/{ids[-1]}"
    listed = api.get(f"{API}/jobs", key=employer.key, headers=FORGED, params={"pageSize": 1})
    assert listed.json["paging"]["next"].startswith(f"{base}{API}/jobs?")
    # An applicant's forged headers: the signed payload's resumeUrl is the service's own.
    application = {
        "name": "Ada",
        "email": "ada@example.org",
        "resume": {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()},
    }
    applied = api.post(f"{API}/jobs/{ids[0]}/applications", json=application, headers=FORGED)
    assert applied.status_code == 202, applied.text
    with sessions() as s:
        [payload] = s.scalars(select(WebhookMessage.payload)).all()
    data = json.loads(payload)["data"]
    assert data["resumeUrl"] == f"{base}{API}/applications/{applied.json['id']}/resume"
    page = falcon.testing.TestClient(app).simulate_get(f"/jobs/{ids[0]}", headers=FORGED)
    assert re.findall(r'<link rel="canonical" href="([^"]+)">', page.text) == [
        f"{base}/jobs/{ids[0]}?lang=en"
    ]
    assert "attacker" not in payload + page.text + json.dumps(listed.json)
