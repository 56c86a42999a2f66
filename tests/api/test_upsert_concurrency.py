"""C4 concurrency against a real server: gunicorn (several processes and threads) on a
PostgreSQL database of its own, with committed data. Concurrent creates with one new
referenceId produce exactly one job; the losers are answered as if they came second (PUT:
an update, POST: 409), never a 500. Also C1's 413 for a chunked body through a real server."""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.db.engines import make_engine
from models.db.entities import Job
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.factories import JOBS, job_body
from tests.harness import Program, free_port
from tests.services import scratch_postgres

CLIENTS = 20

# A real gunicorn on a scratch PostgreSQL: the full suite's, not `make check`'s.
pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@dataclass
class Server:
    port: int
    key: str
    employer_id: int
    sessions: sessionmaker[Session]

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {"API-Key": self.key, **(headers or {})}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                sent.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def jobs_with(self, reference_id: str) -> int:
        with self.sessions() as s:
            query = select(func.count()).where(
                Job.employer_id == self.employer_id, Job.reference_id == reference_id
            )
            return s.scalar(query) or 0


def answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/api/v1.1/positiontypes")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """gunicorn, 4 processes of 5 threads (20 requests at once), on committed PostgreSQL."""
    tmp = tmp_path_factory.mktemp("gunicorn")
    with scratch_postgres() as url:
        engine = make_engine(url)
        upgrade(engine)
        sessions = make_sessionmaker(engine)
        with session_scope(sessions) as s:
            employer = employers.create_employer(s, "Race Bakery")
            issued = employers.issue_key(s, employer.id)
        port = free_port()
        (tmp / "prometheus").mkdir()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "JOBPOST_VAR_DIR": str(tmp),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / "prometheus"),
            "APPLY_RATE_LIMIT": "off",
        }
        env.pop("PUBLIC_BASE_URL", None)
        command = [sys.executable, "-m", "gunicorn", "--workers", "4", "--threads", "5"]
        command += ["--worker-class", "gthread", "--bind", f"127.0.0.1:{port}"]
        command += ["--graceful-timeout", "5", "api.app:get_app()"]
        try:
            with Program(command, tmp / "gunicorn.log", env=env, name="gunicorn") as gunicorn:
                gunicorn.wait_until(lambda: answers(port), timeout=60, what="gunicorn to answer")
                yield Server(port, issued.key, employer.id, sessions)
        finally:
            engine.dispose()


def _at_once(server: Server, method: str, body: dict[str, Any]) -> list[tuple[int, bytes]]:
    """CLIENTS threads, released together by a barrier, each sending one request."""
    barrier = threading.Barrier(CLIENTS)
    results: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        outcome = server.request(method, JOBS, body)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == CLIENTS
    return results


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_puts_with_one_new_reference_id_make_exactly_one_job(
    server: Server, round_: int
) -> None:
    """C4: exactly one job; one 201, the others answered as updates (200), never a 500."""
    ref = f"RACE-PUT-{round_}"
    results = _at_once(server, "PUT", job_body(referenceId=ref, title=f"Race {round_}"))
    statuses = Counter(status for status, _body in results)
    assert statuses == {201: 1, 200: CLIENTS - 1}, [r for r in results if r[0] >= 300][:3]
    ids = {json.loads(body)["id"] for _status, body in results}
    assert len(ids) == 1
    assert server.jobs_with(ref) == 1


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_posts_with_one_new_reference_id_give_one_201_and_409s(
    server: Server, round_: int
) -> None:
    """C4: the losers of a POST race are 409 duplicate_reference_id, never a 500."""
    ref = f"RACE-POST-{round_}"
    results = _at_once(server, "POST", job_body(referenceId=ref))
    statuses = Counter(status for status, _body in results)
    assert statuses == {201: 1, 409: CLIENTS - 1}, [r for r in results if r[0] >= 500][:3]
    for status, body in results:
        if status == 409:
            assert json.loads(body)["code"] == "duplicate_reference_id"
    assert server.jobs_with(ref) == 1


def _chunked(server: Server, payload: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        chunks = (payload[i : i + 65536] for i in range(0, len(payload), 65536))
        conn.request(
            "POST",
            JOBS,
            body=chunks,
            encode_chunked=True,
            headers={
                "API-Key": server.key,
                "Content-Type": "application/json",
                "Transfer-Encoding": "chunked",
            },
        )
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_chunked_body_over_1_mib_is_413_through_a_real_server(server: Server) -> None:
    """C1: 413 also when the body is sent chunked, without a Content-Length."""
    status, body = _chunked(server, b'{"title": "' + b"x" * (1024 * 1024 + 10) + b'"}')
    assert status == 413 and json.loads(body)["code"] == "payload_too_large"


def test_a_small_chunked_body_is_read_through_a_real_server(server: Server) -> None:
    status, body = _chunked(server, json.dumps(job_body(title="Chunked")).encode())
    assert status == 201 and json.loads(body)["title"] == "Chunked"
