"""The floor of a write (`bench.floor`, issue 15) does a write's real work: it replays the
statements the app ran for a PUT by referenceId, in one transaction, under gunicorn as the API
is served; so its rate bounds what the app's own code could reach. Nothing here is timed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from bench import floor
from bench.http import Client
from models import employers
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import migrated
from tests.factories import JOBS, job_body


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with migrated("postgresql", tmp_path_factory.mktemp("floor")) as engine:
        yield engine


def _key_and_job(engine: Engine) -> tuple[str, int]:
    """An employer's key, and its job NW-1 titled "Baker"."""
    with session_scope(make_sessionmaker(engine)) as session:
        employer = employers.create_employer(session, "Northwind")
        key = employers.issue_key(session, employer.id).key
    url = engine.url.render_as_string(hide_password=False)
    body = json.dumps(job_body(referenceId="NW-1", title="Baker", status="active"))
    floor.capture(url, key, [body], JOBS)  # creates it: not a write of the usual kind
    with engine.connect() as conn:
        job_id = conn.scalar(text("SELECT id FROM jobs WHERE reference_id = 'NW-1'"))
    assert job_id is not None
    return key, job_id


def _title(engine: Engine, job_id: int) -> tuple[str, int]:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT title, version FROM jobs WHERE id = :i"), {"i": job_id})
        title, version = row.one()
    return title, version


def test_the_replay_writes_what_the_app_wrote_and_answers_the_same(
    database: Engine, tmp_path: Path
) -> None:
    key, job_id = _key_and_job(database)
    url = database.url.render_as_string(hide_password=False)
    bodies = [
        json.dumps(job_body(referenceId="NW-1", title=title, status="active"))
        for title in ("Head Baker", "Pastry Chef", "Baker")
    ]
    writes = floor.capture(url, key, bodies, JOBS)
    assert len(writes) == 3  # each an update of the job, of the same statements
    assert len({tuple(sql for sql, _values in w.statements) for w in writes}) == 1
    assert json.loads(writes[0].answer)["title"] == "Head Baker"
    assert _title(database, job_id) == ("Baker", 4)
    with floor.serving(url, writes[:1], workers=1, log_path=tmp_path / "floor.log") as srv:
        client = Client(srv.base_url, timeout=10)
        answer = client.request("PUT", floor.PATH, bodies[0], auth=False)
        assert answer.status == 200
        assert answer.json()["title"] == "Head Baker"
        # The app's own statements ran and committed: the title, and the version raised.
        assert _title(database, job_id) == ("Head Baker", 5)
        assert len(srv.worker_pids()) == 1


def test_a_write_the_app_refused_stops_the_capture(database: Engine) -> None:
    url = database.url.render_as_string(hide_password=False)
    with pytest.raises(RuntimeError, match="answered 401"):
        floor.capture(url, "not-a-key-of-anyone", [json.dumps(job_body())], JOBS)
