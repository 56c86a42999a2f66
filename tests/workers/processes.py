"""Real processes for the delivery tests (C8): a private redis-server, a `celery worker`,
and an SMTP sink that can be started late, on a port chosen in advance, and made slow."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiosmtpd.controller import Controller

from models.settings import VARIABLES
from tests.conftest import SmtpSink, free_port
from tests.services import missing
from workers.app import worker_pool

ROOT = Path(__file__).resolve().parents[2]
JOBPOST = [sys.executable, "-m", "workers.cli"]  # the `jobpost` command, as this Python runs it
T = TypeVar("T")

# Every variable jobpost reads: a worker sees only the values its test gives it.
C9_VARIABLES = VARIABLES


def wait_for(
    check: Callable[[], T | bool | None],
    *,
    timeout: float,
    what: str,
    every: Callable[[], object] | None = None,
    period: float = 1.0,
    interval: float = 0.05,
) -> T | bool:
    """Poll `check` until it returns something truthy; `every` runs each `period` seconds
    (the sweeper, for instance). Fails after `timeout` seconds, naming `what`."""
    deadline = time.monotonic() + timeout
    next_tick = time.monotonic()
    while True:
        now = time.monotonic()
        if every is not None and now >= next_tick:
            every()
            next_tick = now + period
        result = check()
        if result:
            return result
        if now > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def _log_tail(path: Path, limit: int = 20_000) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return text if len(text) <= limit else "…" + text[-limit:]


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM to the main process (a warm shutdown), then SIGKILL to its group."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    # Pool children may outlive their leader: the whole group goes in any case.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(10)


def jobpost(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A `jobpost` command run to its end, its output captured."""
    return subprocess.run(
        [*JOBPOST, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


class RedisServer:
    """A private redis-server on a free port: the test may stop and restart it at will."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing("the redis-server program")  # skips, or fails under CI=true
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.log = workdir / f"redis-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        command = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--daemonize",
            "no",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for(self.answers, timeout=10, what=f"redis-server on port {self.port}")

    def answers(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"redis-server exited:\n{_log_tail(self.log)}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc, timeout=5)


# A worker on the app `jobpost worker` runs (workers.cli.services.worker_app), taking Celery's
# worker options; the limited one's task time limits are the two numbers first (soft, hard).
WORKER_APP = (
    "import sys; from models.settings import Settings; from workers.cli.services import "
    "worker_app; app = worker_app(Settings.from_env()); "
)
CELERY_WORKER = WORKER_APP + "app.worker_main(['worker', *sys.argv[1:]])"
LIMITED_WORKER = WORKER_APP + (
    "app.conf.update(task_soft_time_limit=float(sys.argv[1]), "
    "task_time_limit=float(sys.argv[2])); "
    "app.worker_main(['worker', *sys.argv[3:]])"
)


class Worker:
    """`celery worker` in a session (process group) of its own, logging to a file, with the
    pool `jobpost worker` would choose for `concurrency` (workers.app.worker_pool)."""

    def __init__(
        self,
        env: Mapping[str, str],
        log: Path,
        *,
        name: str,
        concurrency: int,
        time_limits: tuple[float, float] | None = None,
    ) -> None:
        """`time_limits`: (soft, hard) seconds instead of the app's task time limits."""
        self.log, self.name = log, name
        self.log_offset = log.stat().st_size if log.exists() else 0  # where this run begins
        env, pool = dict(env), worker_pool(concurrency)
        if pool not in ("prefork", "solo"):  # given by module path: Celery's "custom" pool
            env["CELERY_CUSTOM_WORKER_POOL"], pool = pool, "custom"
        celery = [sys.executable, "-c", CELERY_WORKER]
        if time_limits is not None:
            celery = [sys.executable, "-c", LIMITED_WORKER, *map(str, time_limits)]
        command = [
            *celery,
            "-Q",
            "email,maintenance",
            "--concurrency",
            str(concurrency),
            "--pool",
            pool,
            "--loglevel",
            "INFO",
            "-n",
            f"{name}@%h",
            # Each test has a broker of its own: there is no neighbour to synchronise with,
            # and mingle would only add a second to every start.
            "--without-mingle",
        ]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                command,
                cwd=ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        """What this worker has logged so far."""
        with self.log.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"worker {self.name} exited ({self.proc.returncode}):\n{_log_tail(self.log)}"
                )
            return any(
                f"{self.name}@" in line and line.rstrip().endswith(" ready.")
                for line in self.text().splitlines()
            )

        wait_for(ready, timeout=timeout, what=f"worker {self.name} to be ready")

    def kill(self) -> None:
        """SIGKILL to the main process and its pool children at once: no warm shutdown."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL to the group after `timeout` seconds."""
        stop_group(self.proc, timeout=timeout)


def worker_env(
    *,
    database_url: str,
    broker_url: str,
    smtp_port: int,
    workdir: Path,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a worker (and the Settings of the test process): short C9 timings
    so that a lease runs out or a retry comes due within seconds."""
    env = {k: v for k, v in os.environ.items() if k not in C9_VARIABLES}
    (workdir / "prometheus").mkdir(parents=True, exist_ok=True)
    env.update(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        SMTP_HOST="127.0.0.1",
        SMTP_PORT=str(smtp_port),
        SMTP_TIMEOUT="10",
        MAIL_FROM="Jobpost <jobpost@jobs.test>",
        APPLY_RATE_LIMIT="off",
        OUTBOX_SWEEP_GRACE_SECONDS="1",
        OUTBOX_LEASE_SECONDS="3",  # above a send's real duration (a few ms to the sink)
        DELIVERY_RETRY_BASE_SECONDS="1",
        PROMETHEUS_MULTIPROC_DIR=str(workdir / "prometheus"),
        JOBPOST_VAR_DIR=str(workdir),
        WORKER_METRICS_PORT=str(free_port()),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env


class SlowSink(SmtpSink):
    """The sink of conftest, counting RCPTs, connections (EHLO) and QUITs, and taking
    `delay` seconds to answer DATA."""

    def __init__(self, host: str, port: int, delay: float = 0.0) -> None:
        super().__init__(host=host, port=port)
        self.delay = delay
        self.rcpt_count = 0  # RCPT commands seen, refused ones included: the attempts
        self.ehlo_count = 0  # one per connection: smtplib greets once
        self.quit_count = 0

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        self.ehlo_count += 1
        session.host_name = hostname  # what aiosmtpd does itself when there is no hook
        return responses

    async def handle_QUIT(self, server: Any, session: Any, envelope: Any) -> str:
        self.quit_count += 1
        return "221 Bye"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        self.rcpt_count += 1
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().handle_DATA(server, session, envelope)

    def message_ids(self) -> list[str]:
        return [str(m["Message-ID"]) for m in list(self.messages)]


class SinkServer:
    """A sink on a given port, started when the test says so (the relay comes up late)."""

    def __init__(self, port: int | None = None, delay: float = 0.0) -> None:
        self.sink = SlowSink("127.0.0.1", port or free_port(), delay)
        self.controller: Controller | None = None

    @property
    def port(self) -> int:
        return self.sink.port

    def start(self) -> SlowSink:
        self.controller = Controller(
            self.sink,
            hostname=self.sink.host,
            port=self.sink.port,
            server_hostname="localhost",
            ready_timeout=5.0,
        )
        self.controller.start()
        return self.sink

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
