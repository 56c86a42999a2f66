"""C23 across processes: two real `jobpost serve` processes on one Redis count one key's
requests together, so a client spreading its calls over web hosts meets the same limit."""

from __future__ import annotations

import functools
import http.client
import time

import pytest

from models import employers
from models.db.unit_of_work import session_scope
from tests.harness import JOBPOST, Program, free_port
from tests.workers.processes import worker_env
from tests.workers.stacks import REDIS_SQLITE, Stack
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from tests.workers.test_public_urls import listening

pytestmark = pytest.mark.slow


def get(port: int, key: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/api/v1.1/jobs", headers={"API-Key": key})
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer


@pytest.mark.parametrize("stack", [REDIS_SQLITE], indirect=True)
def test_two_web_processes_share_a_keys_limit_through_redis(stack: Stack) -> None:
    with session_scope(stack.sessions) as session:
        employer = employers.create_employer(session, "Maple Corp")
        key = employers.issue_key(session, employer.id).key
    extra = {"API_RATE_LIMIT_STANDARD": "4/hour,off"}
    env = worker_env(
        database_url=stack.database_url,
        broker_url=stack.broker_url,
        smtp_port=1,
        workdir=stack.workdir,
        extra=extra,
    )
    ports = [free_port(), free_port()]
    webs = [
        Program(
            [*JOBPOST, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stack.workdir / f"web-{port}.log",
            env=env,
            name=f"web {port}",
        )
        for port in ports
    ]
    try:
        for web, port in zip(webs, ports, strict=True):
            web.wait_until(functools.partial(listening, port), timeout=60, what="jobpost serve")
        if time.time() % 3600 > 3570:  # not across the hour's window
            time.sleep(3601 - time.time() % 3600)
        seen = [get(ports[i % 2], key) for i in range(5)]
        assert [a.status for a in seen] == [200, 200, 200, 200, 429]
        left = [a.getheader("RateLimit", "") for a in seen[:4]]
        assert [h.split(";")[1] for h in left] == ["r=3", "r=2", "r=1", "r=0"]
        assert int(seen[4].getheader("Retry-After") or 0) >= 1
    finally:
        for web in webs:
            web.stop()
