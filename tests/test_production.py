"""The production shape, as the image installs and runs it (C9, issue 27).

A fresh virtualenv gets requirements.txt alone (every file checked against its hash) and then
`pip install --no-deps .` of a copy of the repository's tracked files: exactly the Dockerfile's
two steps. From it run `jobpost serve`, `jobpost worker` and `jobpost beat` on a PostgreSQL
database and a redis-server of this module's own, with Debian's nginx in front on the shipped
deploy/nginx.conf (only its lines marked `# site:` replaced), an SMTP server in this process
and a webhook receiver. Everything the tests ask goes through nginx, as a client's would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import smtplib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from standardwebhooks import Webhook

from tests.api.applying import multipart
from tests.conftest import SmtpSink
from tests.harness import Program, SmtpServer, copy_tracked, free_port, wait_for
from tests.resume_files import DOCX_BYTES
from tests.services import missing, private_redis, scratch_postgres
from tests.webhook_receiver import Receiver, receiving
from tests.workers.processes import C9_VARIABLES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
API = "/api/v1.1"
# A directive the file marks as one a deployment sets for itself: `name args;  # site: key`.
SITE_LINE = re.compile(r"^(\s*)(\S+)\s[^;\n]*;(\s*# site: (\S+))$", re.MULTILINE)
JOB = {
    "title": "Production Line Cook",
    "status": "active",
    "locations": [{"description": "Toronto, ON"}],
    "categories": [{"id": 12}],
    "positionType": {"id": 1},
    "description": "<p>Sauces.</p>",
    "applicantRoutingType": {"id": 1},
    "applicationEmail": "chef@production.test",
}


def nginx_binary() -> str:
    """nginx's path (Debian installs it in /usr/sbin, outside a user's PATH)."""
    found = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if found is None:
        missing("nginx (make nginx installs Debian's package)")
    return found


def site_config(values: dict[str, str]) -> str:
    """deploy/nginx.conf with the arguments of each `# site:` line replaced, and no other."""
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        seen.add(match.group(4))
        return f"{match.group(1)}{match.group(2)} {values[match.group(4)]};{match.group(3)}"

    text = SITE_LINE.sub(replace, NGINX_CONF.read_text("utf-8"))
    assert seen == set(values), f"deploy/nginx.conf marks {sorted(seen)}, not {sorted(values)}"
    return text


@pytest.fixture(scope="module")
def image_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a virtualenv installed as the Dockerfile installs the image."""
    base = tmp_path_factory.mktemp("image")
    source = copy_tracked(base / "src")  # the build leaves nothing in the checkout
    venv = base / "venv"
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "pip"), "install", "-q", "--require-hashes", "-r", "requirements.txt"],
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "."],
    ]
    for step in steps:
        done = subprocess.run(step, cwd=source, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(step)}:\n{done.stdout}\n{done.stderr}"
    return venv / "bin"


@dataclass
class Topology:
    bin: Path
    env: dict[str, str]
    home: Path
    url: str  # nginx's
    web: Program
    programs: list[Program]  # serve, worker, beat and nginx
    sink: SmtpSink
    receiver: Receiver

    def jobpost(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "jobpost"), *argv],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.url + path, data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def image_env(bin: Path, home: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in C9_VARIABLES and k != "VIRTUAL_ENV"}
    env["PATH"] = f"{bin}:/usr/local/bin:/usr/bin:/bin"
    env.update(PYTHONUNBUFFERED="1", JOBPOST_VAR_DIR=str(home / "var"), **values)
    return env


@pytest.fixture(scope="module")
def topology(image_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    nginx = nginx_binary()
    home = tmp_path_factory.mktemp("production")
    with ExitStack() as stack:
        database_url = stack.enter_context(scratch_postgres())
        redis = private_redis(home)
        stack.enter_context(redis)
        sink = stack.enter_context(SmtpServer(SmtpSink(host="127.0.0.1", port=free_port())))
        receiver = stack.enter_context(receiving())
        web_port, nginx_port = free_port(), free_port()
        url = f"http://127.0.0.1:{nginx_port}"
        (home / "prometheus").mkdir()
        env = image_env(
            image_bin,
            home,
            DATABASE_URL=database_url,
            CELERY_BROKER_URL=redis.url,
            REDIS_URL=redis.url.removesuffix("/0") + "/1",
            SMTP_HOST="127.0.0.1",
            SMTP_PORT=str(sink.port),
            MAIL_FROM="Jobpost <jobpost@jobs.test>",
            PUBLIC_BASE_URL=url,
            PROMETHEUS_MULTIPROC_DIR=str(home / "prometheus"),
            WORKER_METRICS_PORT=str(free_port()),
            TRUSTED_PROXIES="127.0.0.1",
            JOBPOST_SECRET_KEY=Fernet.generate_key().decode(),
            WEBHOOK_ALLOW_HTTP="true",  # the receiver is plain HTTP on loopback
            WEBHOOK_ALLOW_PRIVATE="true",
            WEBHOOK_ALLOWED_PORTS="1024-65535",  # the receiver's free port (C12)
        )
        migrated = subprocess.run(
            [str(image_bin / "jobpost"), "db", "upgrade"],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrated.returncode == 0, migrated.stderr

        def start(name: str, *argv: str) -> Program:
            command = [str(image_bin / "jobpost"), *argv]
            program = Program(command, home / f"{name}.log", env=env, cwd=home, name=name)
            return stack.enter_context(program)

        web = start(
            "web", "serve", "--host", "127.0.0.1", "--port", str(web_port), "--workers", "2"
        )
        worker = start("worker", "worker", "--concurrency", "1")
        beat = start("beat", "beat")
        folder = home / "nginx"
        folder.mkdir()
        config = folder / "nginx.conf"
        temp = {f"{kind}_temp_path": str(folder / kind) for kind in ("client_body", "proxy")}
        temp |= {f"{kind}_temp_path": str(folder / kind) for kind in ("fastcgi", "uwsgi", "scgi")}
        config.write_text(
            site_config(
                {
                    "pid": str(folder / "nginx.pid"),
                    "error_log": f"{folder / 'error.log'} warn",
                    "access_log": str(folder / "access.log"),
                    "upstream": f"127.0.0.1:{web_port}",
                    "listen": f"127.0.0.1:{nginx_port}",
                    **temp,
                }
            )
        )
        globals_ = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
        command = [nginx, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(config)]
        proxy = Program([*command, "-g", globals_], folder / "nginx.out", name="nginx")
        stack.enter_context(proxy)
        programs = [web, worker, beat, proxy]
        running = Topology(image_bin, env, home, url, web, programs, sink, receiver)

        def healthy() -> bool:
            try:
                return proxy.alive() and running.call("GET", "/healthz")[0] == 200
            except OSError:  # nginx not listening yet
                return False

        web.wait_until(
            healthy,
            timeout=60,
            what="jobpost serve to answer /healthz through nginx",
        )
        yield running


def test_jobpost_bounces_runs_from_the_image_and_answers_smtp(
    image_bin: Path, tmp_path: Path
) -> None:
    """C22: the receiver needs aiosmtpd, which the image's requirements.txt now holds."""
    port = free_port()
    env = image_env(
        image_bin,
        tmp_path,
        BOUNCE_DOMAIN="bounces.example.com",
        DATABASE_URL=f"sqlite:///{tmp_path}/jobpost.db",
        JOBPOST_SECRET_KEY="a" * 43 + "=",
    )
    command = [str(image_bin / "jobpost"), "bounces", "--host", "127.0.0.1", "--port", str(port)]
    with subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE) as running:
        try:

            def greets() -> bool:
                assert running.poll() is None, running.stderr and running.stderr.read()
                try:
                    with smtplib.SMTP("127.0.0.1", port, timeout=2) as conn:
                        return conn.noop()[0] == 250
                except OSError:
                    return False

            wait_for(greets, timeout=60, what="jobpost bounces from the image")
        finally:
            running.terminate()
            running.wait(timeout=10)


def test_an_application_through_nginx_reaches_the_employer_by_mail_and_webhook(
    topology: Topology,
) -> None:
    created = topology.jobpost("employers", "create", "Production Inc", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["apiKey"]
    keyed = {"API-Key": key, "Content-Type": "application/json"}
    hook = {"url": topology.receiver.url(host="127.0.0.1"), "events": ["application.received"]}
    status, raw = topology.call("POST", f"{API}/webhooks", json.dumps(hook).encode(), keyed)
    assert status == 201, raw
    secret = json.loads(raw)["secret"]
    status, raw = topology.call("POST", f"{API}/jobs", json.dumps(JOB).encode(), keyed)
    assert status == 201, raw
    job_id = json.loads(raw)["id"]

    content_type, body = multipart(
        {"name": "Grace Hopper", "email": "grace@example.org"},
        {"resume": ("Grace CV.docx", "application/octet-stream", DOCX_BYTES)},
    )
    status, raw = topology.call(
        "POST", f"{API}/jobs/{job_id}/applications", body, {"Content-Type": content_type}
    )
    assert status == 202, raw
    application_id = json.loads(raw)["id"]

    def copy() -> EmailMessage | None:
        title = str(JOB["title"])
        return next((m for m in topology.sink.messages if title in str(m["Subject"])), None)

    message = wait_for(copy, timeout=60, what="the application's copy at the SMTP server")
    assert isinstance(message, EmailMessage)
    assert message["To"] == JOB["applicationEmail"]
    attached = [part.get_payload(decode=True) for part in message.iter_attachments()]
    assert DOCX_BYTES in attached

    received = wait_for(
        lambda: topology.receiver.received, timeout=60, what="the application.received webhook"
    )
    assert isinstance(received, list)
    payload = Webhook(secret).verify(received[0].body, received[0].headers)
    assert payload["type"] == "application.received"
    assert payload["data"]["id"] == application_id
    assert payload["data"]["resume"]["size"] == len(DOCX_BYTES)
    for program in topology.programs:  # beat too (on the old lock it stopped at once)
        assert program.alive()


def test_a_body_over_the_largest_accepted_is_refused_by_nginx_in_the_c1_shape(
    topology: Topology,
) -> None:
    headers = {"Content-Type": "application/json", "Content-Length": str(52 * 1024 * 1024)}
    port = int(topology.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        lines = [f"POST {API}/syncs HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        client.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"content-type: application/problem+json" in head.lower()
    assert json.loads(body)["code"] == "payload_too_large"


def requests_seen(topology: Topology, route: str) -> int:
    """How many requests the web processes answered on `route`, by their /metrics."""
    status, raw = topology.call("GET", "/metrics")
    assert status == 200
    pattern = re.compile(
        rf'^http_requests_total\{{[^}}]*route="{re.escape(route)}"[^}}]*\}} (\S+)$'
    )
    return sum(
        int(float(m.group(1))) for line in raw.decode().splitlines() if (m := pattern.match(line))
    )


def test_stalled_uploads_wait_at_nginx_and_never_reach_the_app(topology: Topology) -> None:
    """Eight clients that send headers and half a body, then nothing: more than the web's two
    sync workers. With a valid key the app would read each body, a worker held per client;
    nginx holds them instead: /healthz answers within 1 s and gunicorn never sees them."""
    created = topology.jobpost("employers", "create", "Stalled Inc", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["apiKey"]
    route = f"{API}/syncs"
    half = b'{"mode": "upsert", "jobs": [' + b" " * 50_000
    head = (
        f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nAPI-Key: {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {2 * len(half)}\r\n\r\n"
    ).encode()
    port = int(topology.url.rsplit(":", 1)[1])
    stalled = []
    try:
        for _ in range(8):
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            client.sendall(head + half)
            stalled.append(client)
        time.sleep(0.5)  # nginx has read what they sent
        for _ in range(5):
            started = time.monotonic()
            status, _ = topology.call("GET", "/healthz")
            assert status == 200
            assert time.monotonic() - started < 1.0, "a stalled upload delayed /healthz"
        assert requests_seen(topology, route) == 0
    finally:
        for client in stalled:
            client.close()
    # The same request sent whole does reach the app: the count above would have seen the
    # stalled ones, had nginx passed them on.
    headers = {"API-Key": key, "Content-Type": "application/json"}
    status, raw = topology.call("POST", route, b'{"mode": "upsert", "jobs": []}', headers)
    assert 200 <= status < 500, raw
    assert requests_seen(topology, route) == 1
    assert topology.web.text().count(f'"route":"{route}"') == 1
