"""The one-command stack (C9): what `make run` does, for real, in a directory of its own.

`jobpost db upgrade`, `jobpost demo`, then `jobpost dev` as a subprocess on the embedded defaults
(SQLite and the SQLite broker under JOBPOST_VAR_DIR, no DATABASE_URL or CELERY_BROKER_URL), with
the mail sink on a free port. The tests create a job and apply to it over HTTP and find the copy
under var/mail/, run the curl commands `jobpost demo` prints and the README's API tour exactly as
written, and finally stop everything with SIGINT (Ctrl-C).

The README tour names http://127.0.0.1:8000, the port of `make run`. The stack listens there
when 8000 is free; otherwise on a free port, and then (only then) `127.0.0.1:8000` in the tour
is rewritten to that port before it runs. Nothing else in the commands is changed.

The stack is started once for the module; the SIGINT test comes last and stops it.
"""

from __future__ import annotations

import email
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Program, free_port, wait_for
from tests.workers.processes import C9_VARIABLES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
JOBPOST = Path(sys.executable).with_name("jobpost")
MAKE_RUN_PORT = 8000


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Stack:
    home: Path  # the working directory: var/ is here, as in a clone
    port: int
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    log: Path
    demo_output: str

    @property
    def var(self) -> Path:
        return self.home / "var"

    @property
    def key(self) -> str:
        return (self.var / "demo-key").read_text().strip()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def call(self, method: str, path: str, body: Any = None, *, key: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url(path), data=data, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if key:
            request.add_header("API-Key", self.key)
        with urllib.request.urlopen(request, timeout=10) as response:
            assert 200 <= response.status < 300
            raw = response.read()
            return json.loads(raw) if raw else None

    def jobpost(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(JOBPOST), *argv],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def bash(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def mails(self) -> list[EmailMessage]:
        found = []
        for path in sorted((self.var / "mail").glob("*")):
            message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
            assert isinstance(message, EmailMessage)
            found.append(message)
        return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("clone")
    port = MAKE_RUN_PORT if port_is_free(MAKE_RUN_PORT) else free_port()
    env = {k: v for k, v in os.environ.items() if k not in C9_VARIABLES}
    env.update(
        JOBPOST_VAR_DIR=str(home / "var"),
        SMTP_PORT=str(free_port()),
        WORKER_METRICS_PORT=str(free_port()),
        PYTHONUNBUFFERED="1",
    )

    def step(*argv: str) -> str:
        done = subprocess.run(
            [str(JOBPOST), *argv],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"jobpost {' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    step("db", "upgrade")
    demo_output = step("demo", "--port", str(port))
    log = home / "dev.log"
    dev = Program([str(JOBPOST), "dev", "--port", str(port)], log, env=env, cwd=home)
    running = Stack(home, port, env, dev.proc, log, demo_output)

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(running.url("/healthz"), timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    try:
        dev.wait_until(healthy, timeout=90, what="jobpost dev to answer /healthz")
        yield running
    finally:
        dev.stop(timeout=20, signum=signal.SIGINT)  # Ctrl-C, as `make run` is stopped


# --- `make run` --------------------------------------------------------------------------------


def test_make_run_migrates_then_issues_the_demo_key_then_starts_dev() -> None:
    """The three steps the rest of this module runs, in the Makefile's order."""
    done = subprocess.run(
        ["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    steps = [
        line.split("/bin/jobpost ", 1)[1]
        for line in done.stdout.splitlines()
        if "/bin/jobpost " in line
    ]
    assert steps == ["db upgrade", "demo", "dev"]


# --- `jobpost demo` ----------------------------------------------------------------------------


def test_demo_prints_a_fresh_key_and_writes_it_to_var_demo_key(stack: Stack) -> None:
    key = stack.key
    assert re.fullmatch(r"jp_[A-Za-z0-9_-]{43}", key)
    assert key in stack.demo_output and str(stack.var / "demo-key") in stack.demo_output

    again = stack.jobpost("demo", "--port", str(stack.port), "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["apiKey"] != key  # a fresh key each time…
    assert stack.key == second["apiKey"]
    listed = stack.jobpost("employers", "list", "--json")
    demo = [e for e in json.loads(listed.stdout)["employers"] if e["name"] == "Demo Employer"]
    assert demo == [
        {"id": second["employerId"], "name": "Demo Employer", "plan": "unlimited", "language": "en"}
    ]
    # …and the earlier one still works (issuing a key revokes none)
    jobs = urllib.request.Request(stack.url("/api/v1.1/jobs"), headers={"API-Key": key})
    with urllib.request.urlopen(jobs, timeout=10) as response:
        assert response.status == 200


def test_the_curl_commands_demo_prints_work_exactly_as_printed(stack: Stack) -> None:
    commands = [
        line.strip() for line in stack.demo_output.splitlines() if line.strip().startswith("curl ")
    ]
    assert len(commands) == 3
    answers = []
    for command in commands:
        done = stack.bash(command)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        answer = json.loads(done.stdout)
        assert "code" not in answer, f"{command} answered a problem: {answer}"
        answers.append(answer)
    position_types, created, active = answers
    assert {"id": 1, "name": "Full Time"} in position_types["data"]
    assert created["status"] == "active" and created["title"] == "Line Cook"
    assert created["id"] in [job["id"] for job in active["data"]]
    assert {job["status"] for job in active["data"]} == {"active"}


# --- the web, the worker and the mail sink together -------------------------------------------


def test_an_application_reaches_var_mail_through_the_worker(stack: Stack) -> None:
    title = "Dev Stack Sous-Chef"
    job = stack.call(
        "POST",
        "/api/v1.1/jobs",
        {
            "title": title,
            "status": "active",
            "locations": [{"description": "Toronto, ON"}],
            "categories": [{"id": 12}],
            "positionType": {"id": 1},
            "description": "<p>Sauces.</p>",
            "applicantRoutingType": {"id": 1},
            "applicationEmail": "chef@devstack.test",
        },
    )
    applicant = {"name": "Grace Hopper", "email": "grace@example.org"}
    answer = stack.call("POST", f"/api/v1.1/jobs/{job['id']}/applications", applicant, key=False)
    assert answer["status"] == "received"

    def copy() -> EmailMessage | None:
        return next((m for m in stack.mails() if title in str(m["Subject"])), None)

    try:
        message = wait_for(copy, timeout=60, what="the copy under var/mail/")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{stack.log_text()[-5000:]}") from None
    assert isinstance(message, EmailMessage)
    assert message["To"] == "chef@devstack.test"
    assert message["Subject"] == f"New application: {title}"
    assert message["Reply-To"].addresses[0].addr_spec == "grace@example.org"
    delivered = stack.call("GET", f"/api/v1.1/applications/{answer['id']}")
    assert delivered["status"] == "sent"


# --- the README's API tour ---------------------------------------------------------------------


def readme_tour() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## API tour\n", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "the API tour has no ```sh block"
    return match.group(1)


def test_the_readme_tour_runs_as_written(stack: Stack) -> None:
    tour = readme_tour()
    lines = [line for line in tour.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "API_KEY=$(cat var/demo-key)"
    curls = [line for line in lines if "curl " in line]
    assert 8 <= len(curls) <= 12
    for line in curls:  # any HTTP error, and any error in a pipeline, fails the script
        assert "curl -fsS" in line, line
    script = tour
    if stack.port != MAKE_RUN_PORT:
        script = tour.replace(f"127.0.0.1:{MAKE_RUN_PORT}", f"127.0.0.1:{stack.port}")
    for run in ("first", "again"):  # the tour cleans up after itself: it can be repeated
        done = stack.bash("set -euo pipefail\n" + script)
        assert done.returncode == 0, f"tour ({run}) failed:\n{done.stdout}\n{done.stderr}"
        assert done.stderr == ""
        out = done.stdout
        assert '"name":"Full Time"' in out and '"name":"Hospitality & Tourism"' in out
        assert '"description":"Montréal, QC"' in out
        assert '"title":"Head Pastry Chef"' in out and '"status":"received"' in out
    left = stack.call("GET", "/api/v1.1/jobs?q=TOUR-1")
    assert left["paging"]["total"] == 0  # the DELETE by referenceId removed it


# --- Ctrl-C ------------------------------------------------------------------------------------


def test_a_second_dev_on_the_same_ports_says_which_is_taken_and_starts_nothing(
    stack: Stack,
) -> None:
    """`make run` twice: the second names the taken ports and exits 1 at once, without a
    traceback, and the first stack goes on answering."""
    second = stack.jobpost("dev", "--port", str(stack.port))
    assert second.returncode == 1, second.stdout + second.stderr
    assert "Traceback" not in second.stderr
    smtp_port = stack.env["SMTP_PORT"]
    assert f"the API cannot listen on 127.0.0.1:{stack.port}" in second.stderr
    assert f"the mail sink cannot listen on 127.0.0.1:{smtp_port}" in second.stderr
    assert "another `make run`" in second.stderr
    assert stack.call("GET", "/healthz", key=False) is not None


def test_sigint_stops_web_worker_beat_and_sink_and_exits_0(stack: Stack) -> None:
    """Last in the module: it stops the stack. Every child is in the dev process's group."""
    group = stack.proc.pid
    started = time.monotonic()
    stack.proc.send_signal(signal.SIGINT)
    try:
        status = stack.proc.wait(20)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"jobpost dev still running 20 s after SIGINT:\n{stack.log_text()[-5000:]}"
        ) from None
    assert status == 0, stack.log_text()[-5000:]

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(
        group_gone,
        timeout=max(20 - (time.monotonic() - started), 1),
        what="every process of jobpost dev to exit",
    )
    assert not listening(stack.port), "the web server still listens"
    assert not listening(int(stack.env["SMTP_PORT"])), "the mail sink still listens"
