"""C11's one run at a time under concurrent intake, on a committed database of its own
(SQLite and PostgreSQL): many first POST /syncs at once make exactly one run, the others are
409 sync_in_progress, never a 500; and concurrent cancels of one run cancel it once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from models import employers
from models.core.settings import Settings
from models.db.entities import SyncItem, SyncRun
from models.db.unit_of_work import make_sessionmaker
from tests.conftest import Api, migrated
from tests.factories import job_body

CLIENTS = 8
SYNCS = "/api/v1.1/syncs"


@pytest.fixture(params=["sqlite", "postgresql"])
def committed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with migrated(request.param, tmp_path, pool_size=CLIENTS + 2) as engine:
        yield engine


def at_once(calls: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_concurrent_first_runs_make_exactly_one(committed: Engine, tmp_path: Path) -> None:
    sessions: sessionmaker[Session] = make_sessionmaker(committed)
    with sessions() as s:
        employer = employers.create_employer(s, "Race Ltd")
        key = employers.issue_key(s, employer.id).key
        s.commit()
    api = Api(create_app(Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}), sessions))

    def post(n: int) -> Any:
        body = {
            "mode": "upsert",
            "jobs": [{**job_body(), "referenceId": f"R{n}-{i}"} for i in range(50)],
        }
        return lambda: api.post(SYNCS, json=body, key=key)

    results = at_once([post(n) for n in range(CLIENTS)])
    statuses = Counter(r.status_code for r in results)
    assert statuses == {202: 1, 409: CLIENTS - 1}, statuses
    assert {r.json["code"] for r in results if r.status_code == 409} == {"sync_in_progress"}
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(SyncRun)) == 1
        assert s.scalar(select(func.count()).select_from(SyncItem)) == 50  # the winner's alone

    run_id = next(r.json["id"] for r in results if r.status_code == 202)
    cancels = at_once([lambda: api.post(f"{SYNCS}/{run_id}/cancel", key=key)] * CLIENTS)
    assert Counter(r.status_code for r in cancels) == {200: 1, 409: CLIENTS - 1}
