"""C9 with real processes: /readyz against a private redis-server that stops and comes back,
/metrics summed across two gunicorn workers, the worker's own /metrics and JSON task log
lines, and the operator commands (`jobpost outbox`, `outbox retry`, `queues`) run as
subprocesses on a committed SQLite database."""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import date
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api import health, ratelimit
from api.app import Collaborators, create_app
from models import employers
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import OutboxEntry
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import Api, SmtpSink, nowhere_url
from tests.factories import create_job, problem
from tests.harness import JOBPOST, ROOT, Program, RedisServer, free_port, wait_for
from tests.openapi_check import check_response
from tests.workers.processes import C9_VARIABLES, jobpost
from workers import broker, enqueue
from workers.app import make_celery

pytestmark = pytest.mark.slow

API = "/api/v1.1"
RECIPIENT = "jobs@maple.test"  # applicationEmail of tests.factories.job_body
TASK_FIELDS = {"task", "task_id", "outcome", "duration_ms", "retries", "request_id"}


# --- processes -----------------------------------------------------------------------------------


class Service(Program):
    """A long-running `jobpost` command in a process group of its own, stdout and stderr
    each to a file."""

    def __init__(self, args: list[str], env: dict[str, str], folder: Path, name: str) -> None:
        self.stdout, self.stderr = folder / f"{name}.out", folder / f"{name}.err"
        # stop(): a warm shutdown (SIGTERM), then whatever is left of the group is killed.
        command = [*JOBPOST, *args]
        super().__init__(command, self.stdout, env=env, errors=self.stderr, stop_timeout=20)

    def json_lines(self) -> list[dict[str, Any]]:
        """Every line on stderr, each of which must be one JSON object (C9)."""
        lines = []
        for raw in self.stderr.read_text().splitlines():
            if raw.strip():
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    raise AssertionError(f"not a JSON log line: {raw!r}") from None
        return lines


def jobpost_all(
    env: dict[str, str], *commands: list[str]
) -> list[subprocess.CompletedProcess[str]]:
    """Several `jobpost` commands at once (each one mostly waits on its imports)."""
    procs = [
        subprocess.Popen(
            [*JOBPOST, *args],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for args in commands
    ]
    done = []
    for args, proc in zip(commands, procs, strict=True):
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess([*JOBPOST, *args], proc.returncode, out, err))
    return done


# jobpost_build_info's labels: the package installed here, on this Python (models.core.build).
BUILD = {"version": metadata.version("jobpost"), "python": platform.python_version()}


def fetch(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of a Prometheus text page, or None when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def total(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file with its reference data, copied by each test (migrating takes
    seconds)."""
    path = tmp_path_factory.mktemp("template") / "jobpost.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()  # the last connection closed: the WAL is folded into the file
    return path


@pytest.fixture
def database(tmp_path: Path, migrated: Path) -> Iterator[tuple[str, Engine]]:
    """A committed SQLite database of this test's own, which subprocesses open too."""
    shutil.copyfile(migrated, tmp_path / "jobpost.db")
    url = f"sqlite:///{tmp_path / 'jobpost.db'}"
    engine = make_engine(url)
    yield url, engine
    engine.dispose()


def environment(tmp_path: Path, database_url: str, **extra: str) -> dict[str, str]:
    """What a `jobpost` subprocess sees: the test's values only, none of the caller's C9."""
    env = {k: v for k, v in os.environ.items() if k not in C9_VARIABLES}
    env.update(
        DATABASE_URL=database_url,
        JOBPOST_VAR_DIR=str(tmp_path / "var"),
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
        WORKER_METRICS_PORT=str(free_port()),
        APPLY_RATE_LIMIT="off",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


class Site:
    """The web app in this process, on the committed database: one employer, one active
    Email-routed job, and applications submitted over the API."""

    def __init__(
        self,
        env: dict[str, str],
        sessions: sessionmaker[Session],
        enqueue_to: Callable[[int, str | None], object] | None = None,
    ) -> None:
        self.sessions = sessions
        settings = Settings.from_env(env)
        parts = Collaborators(limiter=ratelimit.Unlimited())
        if enqueue_to is not None:
            parts.enqueue = enqueue_to
        self.api = Api(create_app(settings, sessions, parts, today=date.today))
        with session_scope(sessions) as s:
            employer = employers.create_employer(s, "Maple Corp")
            self.key = employers.issue_key(s, employer.id).key
        self.job_id = create_job(self.api, SimpleNamespace(key=self.key), status="active")["id"]

    def apply(self, request_id: str, name: str = "Ana Silva") -> int:
        result = self.api.post(
            f"{API}/jobs/{self.job_id}/applications",
            json={"name": name, "email": "ana@example.org"},
            headers={"X-Request-ID": request_id},
        )
        assert result.status_code == 202, result.text
        assert result.headers["x-request-id"] == request_id
        app_id: int = result.json["id"]
        return app_id

    def status(self, application_id: int) -> str:
        with self.sessions() as s:
            entry = s.get(OutboxEntry, application_id)
            assert entry is not None
            return entry.status


def serves_metrics(worker: Service, port: int) -> bool:
    return worker.alive() and fetch(f"http://127.0.0.1:{port}/metrics")[0] == 200


def start_worker(env: dict[str, str], folder: Path) -> Service:
    """`jobpost worker --concurrency 1`, waited for until its /metrics answers."""
    worker = Service(["worker", "--concurrency", "1"], env, folder, "worker")
    url = f"http://127.0.0.1:{env['WORKER_METRICS_PORT']}/metrics"
    wait_for(lambda: worker.alive() and fetch(url)[0] == 200, timeout=60, what="worker metrics")
    return worker


# --- /readyz ------------------------------------------------------------------------------------


def test_readyz_follows_a_broker_that_stops_and_comes_back(
    tmp_path: Path, database: tuple[str, Engine], redis_server: RedisServer
) -> None:
    url, engine = redis_server.url, database[1]
    settings = Settings.from_env(environment(tmp_path, database[0], CELERY_BROKER_URL=url))
    checks: dict[str, health.Check] = {
        "database": health.database_check(engine),
        "broker": lambda: broker.ping(url, 1),
    }
    api = Api(create_app(settings, make_sessionmaker(engine), Collaborators(ready_checks=checks)))
    ready = api.get("/readyz")
    assert (ready.status_code, ready.json) == (200, {"status": "ok"})

    redis_server.stop()
    body = problem(api.get("/readyz"), 503, "not_ready")
    assert "broker" in body["detail"] and "database" not in body["detail"]
    assert api.get("/healthz").status_code == 200  # alive all the same

    redis_server.start()
    wait_for(lambda: api.get("/readyz").status_code == 200, timeout=10, what="ready again")


# --- /metrics through two gunicorn workers -------------------------------------------------------


def test_request_counts_add_up_across_two_gunicorn_workers(
    tmp_path: Path, database: tuple[str, Engine]
) -> None:
    env = environment(tmp_path, database[0])
    home = tmp_path / "home"  # where gunicorn would open its control socket, which we disable
    env.update(HOME=str(home))
    env.pop("XDG_RUNTIME_DIR", None)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = Service(
        ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env,
        tmp_path,
        "web",
    )
    try:
        wait_for(
            lambda: web.alive() and fetch(f"{base}{API}/openapi.json")[0] == 200,
            timeout=60,
            what="gunicorn",
        )
        # One worker takes this connection and waits for its request; meanwhile the other
        # answers the rest. Then it gets its request: both workers have served /healthz.
        held = socket.create_connection(("127.0.0.1", port), timeout=10)
        with held:
            for _ in range(5):
                assert fetch(f"{base}/healthz")[0] == 200
            held.sendall(b"GET /healthz HTTP/1.0\r\nHost: test\r\n\r\n")
            assert held.recv(64).startswith(b"HTTP/1.0 200")
        pids = {p.stem.split("_")[-1] for p in (tmp_path / "prometheus").glob("counter_*.db")}
        assert len(pids) == 2, pids

        for _ in range(6):  # whichever worker answers the scrape, it reports both
            status, text = fetch(f"{base}/metrics")
            assert status == 200
            assert total(text, "http_requests_total", route="/healthz") == 6
            assert (
                metric(text, "http_requests_total", method="GET", route="/healthz", status="200")
                == 6
            )
            assert total(text, "http_request_duration_seconds_count", route="/healthz") == 6
            assert metric(text, "jobpost_outbox_entries", status="pending") == 0
            assert metric(text, "jobpost_outbox_oldest_pending_seconds") == 0
            assert metric(text, "jobpost_queue_length", queue="email") == 0
            assert metric(text, "jobpost_build_info", **BUILD) == 1
        assert not (home / ".gunicorn").exists()  # no control socket another server could take
    finally:
        web.stop()
    access = [line for line in web.json_lines() if line["event"] == "request"]
    healthz = [line for line in access if line["route"] == "/healthz"]
    assert len(healthz) == 6 and {line["status"] for line in healthz} == {200}


def test_jobpost_serve_reads_gunicorn_cmd_args(
    tmp_path: Path, database: tuple[str, Engine]
) -> None:
    """GUNICORN_CMD_ARGS, as gunicorn reads it: here the address, which `jobpost serve` left
    to it (no --host, no --port), and one worker."""
    port = free_port()
    env = environment(tmp_path, database[0], GUNICORN_CMD_ARGS=f"--bind 127.0.0.1:{port} -w 1")
    web = Service(["serve"], env, tmp_path, "web")
    try:
        wait_for(
            lambda: web.alive() and fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200,
            timeout=60,
            what=f"gunicorn on port {port}",
        )
    finally:
        web.stop()
    booted = [line for line in web.json_lines() if line["event"].startswith("Booting worker")]
    assert len(booted) == 1
    listening = f"Listening at: http://127.0.0.1:{port} "
    assert any(line["event"].startswith(listening) for line in web.json_lines())


def _raw(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send `request` as is, then end the sending side; the status line, headers
    (lower-cased) and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, {k.lower(): v for k, v in headers.items()}, body


def test_requests_gunicorn_refuses_are_answered_as_c1_problems(
    tmp_path: Path, database: tuple[str, Engine]
) -> None:
    """C1: every error is application/problem+json, also the ones gunicorn answers itself
    (a request it cannot parse never reaches the app)."""
    port = free_port()
    web = Service(
        ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        environment(tmp_path, database[0]),
        tmp_path,
        "web",
    )
    refused = {  # the status line expected: the request, and the problem's code
        "414 URI Too Long": (
            b"GET /api/v1.1/jobs?q=" + b"a" * 5000 + b" HTTP/1.1\r\n",
            "uri_too_long",
        ),
        "431 Request Header Fields Too Large": (
            b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"b" * 9000 + b"\r\n",
            "headers_too_large",
        ),
        "400 Bad Request": (b"GET /healthz HTTP/1.1 extra\r\n", "malformed_request"),
        "501 Not Implemented": (
            b"POST /api/v1.1/jobs HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: br, chunked\r\n",
            "unsupported_transfer_coding",
        ),
        "417 Expectation Failed": (
            b"GET /healthz HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n",
            "expectation_failed",
        ),
    }
    try:
        wait_for(
            lambda: web.alive() and fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200,
            timeout=60,
            what="gunicorn",
        )
        for expected, (request, code) in refused.items():
            status, headers, body = _raw(port, request + b"\r\n")
            assert status == f"HTTP/1.1 {expected}", (expected, status, body[:200])
            assert headers["content-type"] == "application/problem+json"
            assert headers["connection"] == "close"
            assert int(headers["content-length"]) == len(body)
            number = int(expected.split()[0])
            assert json.loads(body) == {
                "type": "about:blank",
                "title": expected.split(" ", 1)[1],
                "status": number,
                "code": code,
                "detail": json.loads(body)["detail"],
            }
            assert "bbbb" not in body.decode() and "aaaa" not in body.decode()
            method, target = request.decode("latin-1").split(" ")[:2]
            check_response(method, target, number, headers["content-type"], body)  # documented
        # A body whose chunked framing breaks is read by the app: the same problem, a 400.
        apply = (
            b"POST /api/v1.1/jobs/1/applications HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for broken in (b"zz\r\n{}\r\n0\r\n\r\n", b"9\r\n{}"):  # a bad size; cut short
            status, headers, body = _raw(port, apply + broken)
            assert status == "HTTP/1.1 400 Bad Request", (broken, body)
            assert headers["content-type"] == "application/problem+json"
            assert json.loads(body)["code"] == "malformed_json"
        assert fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200  # still serving
    finally:
        web.stop()
    lines = web.json_lines()
    warnings = [line for line in lines if line["event"].startswith("Invalid request from ip=")]
    assert len(warnings) == len(refused), lines


# --- the worker's own /metrics and log lines -----------------------------------------------------


def test_the_worker_counts_and_logs_each_delivery_with_the_request_id(
    tmp_path: Path, database: tuple[str, Engine], redis_server: RedisServer, smtp_sink: SmtpSink
) -> None:
    env = environment(
        tmp_path,
        database[0],
        CELERY_BROKER_URL=redis_server.url,
        SMTP_HOST=smtp_sink.host,
        SMTP_PORT=str(smtp_sink.port),
    )
    celery = make_celery(Settings.from_env(env))
    sessions = make_sessionmaker(database[1])
    site = Site(env, sessions, lambda app_id, rid: enqueue.deliver(celery, app_id, rid))
    worker = start_worker(env, tmp_path)
    metrics_url = f"http://127.0.0.1:{env['WORKER_METRICS_PORT']}/metrics"

    def deliveries(outcome: str) -> float | None:
        return metric(
            fetch(metrics_url)[1], "jobpost_tasks_total", task="jobpost.deliver", outcome=outcome
        )

    try:
        delivered = site.apply("apply-ok.1")
        wait_for(
            lambda: worker.alive() and site.status(delivered) == "sent",
            timeout=30,
            what="the first copy sent",
        )
        smtp_sink.data_reply = "554 5.6.0 Message refused"  # not the address: failed (C22)
        refused = site.apply("apply-refused.2")
        wait_for(
            lambda: worker.alive() and site.status(refused) == "failed",
            timeout=30,
            what="the second copy failed",
        )
        wait_for(lambda: deliveries("failed") == 1, timeout=10, what="the failure counted")
        assert deliveries("succeeded") == 1
        assert deliveries("retried") is None
        assert metric(fetch(metrics_url)[1], "jobpost_build_info", **BUILD) == 1
    finally:
        worker.stop()
        celery.close()
    assert len(smtp_sink.messages) == 1
    # One process: its tasks run in it (workers.solo), counted and served all the same.
    assert ".> concurrency: 1 (solo)" in worker.stdout.read_text()

    lines = worker.json_lines()  # every line on stderr is JSON
    runs = [line for line in lines if line["event"] == "task" and line["task"] == "jobpost.deliver"]
    assert [(r["request_id"], r["outcome"]) for r in runs] == [
        ("apply-ok.1", "succeeded"),
        ("apply-refused.2", "failed"),
    ]
    for run in runs:
        assert set(run) >= TASK_FIELDS, run
        assert run["task_id"] and run["retries"] == 0
        assert isinstance(run["duration_ms"], int | float) and run["duration_ms"] > 0
    # Celery's own line per task received and succeeded are left out: ours says it all
    celery_lines = [line for line in lines if line["logger"].startswith("celery.")]
    assert not [line for line in celery_lines if "Task jobpost.deliver" in line["event"]]
    assert celery_lines, "Celery's other lines (connected, ready) still pass"
    # what the delivery itself logs carries the request id of its task too
    [refusal] = [line for line in lines if line["logger"] == "jobpost.delivery"]
    assert refusal["request_id"] == "apply-refused.2" and refusal["task_id"] == runs[1]["task_id"]


# --- jobpost outbox, outbox retry, queues --------------------------------------------------------


def table(stdout: str) -> dict[int, list[str]]:
    """`jobpost outbox` rows by application id: [job, status, attempts, recipient, error…]."""
    header, *rows = stdout.splitlines()
    assert header.split()[:5] == ["application", "job", "status", "attempts", "recipient"]
    assert header.rstrip().endswith("last error")
    return {int(row.split()[0]): row.split()[1:] for row in rows if row.strip()}


def test_outbox_and_queue_commands_on_pending_sent_and_failed_entries(
    tmp_path: Path, database: tuple[str, Engine], redis_server: RedisServer, smtp_sink: SmtpSink
) -> None:
    env = environment(
        tmp_path,
        database[0],
        CELERY_BROKER_URL=redis_server.url,
        SMTP_HOST=smtp_sink.host,
        SMTP_PORT=str(smtp_sink.port),
    )
    celery = make_celery(Settings.from_env(env))
    sessions = make_sessionmaker(database[1])
    site = Site(env, sessions, lambda app_id, rid: enqueue.deliver(celery, app_id, rid))
    quiet = Site(env, sessions)  # enqueues nothing: its applications stay pending

    # Queues with work and no worker: depths, and nobody seen.
    for _ in range(2):
        assert enqueue.deliver(celery, 999_999)  # no such application: skipped when run
    celery.send_task("jobpost.expire")
    listed, human = jobpost_all(env, ["queues", "--json"], ["queues"])
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {
        "queues": {"email": 2, "maintenance": 1, "syncs": 0, "webhooks": 0},
        "workers": [],
    }
    assert re.search(r"email\s+2 waiting", human.stdout), human.stdout
    assert re.search(r"maintenance\s+1 waiting", human.stdout), human.stdout
    assert "workers: none seen" in human.stdout

    worker = start_worker(env, tmp_path)
    try:
        sent = site.apply("outbox-sent")
        wait_for(
            lambda: worker.alive() and site.status(sent) == "sent", timeout=30, what="a copy sent"
        )
        smtp_sink.data_reply = "554 5.6.0 Mailbox unavailable"  # not the address: failed (C22)
        failed = site.apply("outbox-failed")
        wait_for(
            lambda: worker.alive() and site.status(failed) == "failed",
            timeout=30,
            what="a copy refused",
        )
        pending = quiet.apply("outbox-pending")
        assert len(smtp_sink.messages) == 1

        everything, only_failed, as_json, retry_pending, retry_sent, usage = jobpost_all(
            env,
            ["outbox"],
            ["outbox", "--status", "failed"],
            ["outbox", "--json"],
            ["outbox", "retry", str(pending)],  # only a failed entry can be retried
            ["outbox", "retry", str(sent)],
            ["outbox", "retry"],  # neither an id nor --all-failed: a usage error
        )
        rows = table(everything.stdout)
        assert sorted(rows) == [failed, pending]  # all but sent
        assert rows[pending][:4] == [str(quiet.job_id), "pending", "0", RECIPIENT]
        assert rows[failed][:4] == [str(site.job_id), "failed", "1", RECIPIENT]
        assert "554 5.6.0 Mailbox unavailable" in " ".join(rows[failed][4:])
        assert sorted(table(only_failed.stdout)) == [failed]
        assert len(as_json.stdout.splitlines()) == 1
        entries = {e["application"]: e for e in json.loads(as_json.stdout)["entries"]}
        assert sorted(entries) == [failed, pending]
        assert entries[failed]["job"] == site.job_id and entries[failed]["attempts"] == 1
        assert entries[failed]["recipient"] == RECIPIENT
        assert "Mailbox unavailable" in entries[failed]["lastError"]
        assert entries[pending]["lastError"] is None
        for refused in (retry_pending, retry_sent):
            assert refused.returncode == 1 and "no failed delivery" in refused.stderr
        assert usage.returncode == 2

        # The relay accepts again: retry sends the copy, once.
        smtp_sink.data_reply = None
        retried = jobpost(env, "outbox", "retry", str(failed), "--json")
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout) == {"retried": [failed], "enqueued": 1}
        wait_for(
            lambda: worker.alive() and site.status(failed) == "sent",
            timeout=30,
            what="the retried copy sent",
        )
        assert len(smtp_sink.messages) == 2
        assert str(smtp_sink.messages[1]["Message-ID"]).startswith(f"<application-{failed}@")
        assert smtp_sink.envelopes[1][1] == [RECIPIENT]

        # The worker drained the queues, and answers.
        listed, human, after = jobpost_all(env, ["queues", "--json"], ["queues"], ["outbox"])
        report = json.loads(listed.stdout)
        assert report["queues"] == {"email": 0, "maintenance": 0, "syncs": 0, "webhooks": 0}
        assert report["workers"] == [f"jobpost-{worker.proc.pid}@{socket.gethostname()}"]
        assert f"workers: {report['workers'][0]}" in human.stdout
        assert sorted(table(after.stdout)) == [pending]
    finally:
        worker.stop()
        celery.close()
    assert len(smtp_sink.messages) == 2  # nothing else went out: the pending one stays
    assert site.status(pending) == "pending"


@pytest.mark.redis
def test_two_workers_on_one_host_are_two_nodes_in_jobpost_queues(
    tmp_path: Path, database: tuple[str, Engine], redis_server: RedisServer
) -> None:
    """Each `jobpost worker` names itself jobpost-<pid>@<host>: two on one host were both
    celery@<host>, and `jobpost queues` saw one, with a DuplicateNodenameWarning."""
    env = environment(tmp_path, database[0], CELERY_BROKER_URL=redis_server.url)
    workers: list[Service] = []
    try:
        for name in ("worker-a", "worker-b"):
            port = free_port()  # a metrics port each
            own = {**env, "WORKER_METRICS_PORT": str(port)}
            workers.append(Service(["worker", "--concurrency", "1"], own, tmp_path, name))
            ready = functools.partial(serves_metrics, workers[-1], port)
            wait_for(ready, timeout=60, what=name)
        listed = jobpost(env, "queues", "--json")
    finally:
        for worker in workers:
            worker.stop()
    assert listed.returncode == 0, listed.stderr
    host = socket.gethostname()
    assert json.loads(listed.stdout)["workers"] == sorted(
        f"jobpost-{worker.proc.pid}@{host}" for worker in workers
    )
    assert "DuplicateNodenameWarning" not in listed.stderr
    for worker in workers:
        assert "DuplicateNodenameWarning" not in worker.stderr.read_text()


def test_a_task_that_raises_counts_as_an_error_not_as_a_copy_given_up(
    tmp_path: Path, unused_port: int
) -> None:
    """C9: `failed` says the relay refused a copy for good (the JobpostDeliveriesFailed
    alert); a delivery whose database is away raises, its entry comes back through the
    sweeper, and it counts as `error`."""
    import workers.tasks  # noqa: F401  (declares the tasks: every app made has them)
    from workers import observability

    away = make_engine(nowhere_url(unused_port))
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    deliver = make_celery(settings, sessions=make_sessionmaker(away)).tasks["jobpost.deliver"]
    observability.connect(settings.worker_metrics_port)  # as `jobpost worker` does

    def count(outcome: str) -> float:
        return float(observability.TASKS.labels("jobpost.deliver", outcome)._value.get())

    before = {o: count(o) for o in ("error", "failed")}
    result = deliver.apply(args=(1,))
    away.dispose()
    assert result.failed()
    assert count("error") == before["error"] + 1
    assert count("failed") == before["failed"]
    assert observability.outcome("jobpost.deliver", "SUCCESS", "failed") == "failed"
    webhook = "jobpost.deliver_webhook"  # C12: a webhook attempt's outcomes alike
    assert observability.outcome(webhook, "SUCCESS", "retry") == "retried"
    assert observability.outcome(webhook, "SUCCESS", "disabled") == "failed"
    assert observability.outcome(webhook, "SUCCESS", "succeeded") == "succeeded"
