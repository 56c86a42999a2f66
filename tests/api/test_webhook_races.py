"""Concurrent registrations (C12): many POSTs at once for an employer near its limit make
exactly ten endpoints, never eleven, on committed data and real connections."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import falcon.testing
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Engine, func, select

from api.app import Collaborators, create_app
from models import employers
from models.core.settings import Settings
from models.db.entities import WebhookEndpoint
from models.db.unit_of_work import make_sessionmaker
from models.webhooks import endpoints as webhooks
from tests.conftest import migrated

THREADS = 6


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    with migrated(request.param, tmp_path_factory.mktemp("hooks")) as engine:
        yield engine


def test_concurrent_registrations_never_make_an_eleventh(database: Engine, tmp_path: Path) -> None:
    sessions = make_sessionmaker(database)
    settings = dataclasses.replace(
        Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}),
        secret_key=Fernet.generate_key().decode(),
    )
    policy = webhooks.UrlPolicy(resolve=lambda host, port, timeout: ["93.184.215.14"])
    app = create_app(settings, sessions, Collaborators(url_policy=policy))
    with sessions() as s:
        employer = employers.create_employer(s, "Racing Ltd", "standard")
        key = employers.issue_key(s, employer.id).key
        s.commit()
        employer_id = employer.id
    client = falcon.testing.TestClient(app)
    body = {"url": "https://hooks.example.com/in", "events": ["*"]}
    for _ in range(8):
        assert (
            client.simulate_post(
                "/api/v1.1/webhooks", headers={"API-Key": key}, json=body
            ).status_code
            == 201
        )
    barrier = Barrier(THREADS)

    def register(_: int) -> int:
        barrier.wait()
        result = falcon.testing.TestClient(app).simulate_post(
            "/api/v1.1/webhooks", headers={"API-Key": key}, json=body
        )
        if result.status_code == 422:
            assert result.json["errors"][0]["code"] == "too_many"
        return result.status_code

    with ThreadPoolExecutor(THREADS) as pool:
        statuses = sorted(pool.map(register, range(THREADS)))
    assert statuses == [201, 201] + [422] * (THREADS - 2)
    with sessions() as s:
        count = select(func.count()).where(WebhookEndpoint.employer_id == employer_id)
        assert s.execute(count).scalar_one() == 10
