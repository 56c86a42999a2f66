"""Real processes for the delivery tests (C8): a `celery worker`, its environment, and an SMTP
sink that can be started late, on a port chosen in advance, and made slow. The harness they
stand on (ports, programs in process groups, redis-server) is tests/harness.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from models.core.settings import VARIABLES
from tests.conftest import SmtpSink
from tests.harness import JOBPOST, ROOT, Program, SmtpServer, free_port
from workers.app import QUEUES, prefetch_multiplier, worker_pool

# Every variable jobpost reads: a worker sees only the values its test gives it.
C9_VARIABLES = VARIABLES


def jobpost(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A `jobpost` command run to its end, its output captured."""
    return subprocess.run(
        [*JOBPOST, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


# A worker on the app `jobpost worker` runs (workers.cli.services.worker_app), taking Celery's
# worker options; the limited one's task time limits are the two numbers first (soft, hard).
WORKER_APP = (
    "import sys; from models.core.settings import Settings; from workers.cli.services import "
    "worker_app; app = worker_app(Settings.from_env()); "
)
CELERY_WORKER = WORKER_APP + "app.worker_main(['worker', *sys.argv[1:]])"
LIMITED_WORKER = WORKER_APP + (
    "app.conf.update(task_soft_time_limit=float(sys.argv[1]), "
    "task_time_limit=float(sys.argv[2])); "
    "app.worker_main(['worker', *sys.argv[3:]])"
)


class Worker(Program):
    """`celery worker` in a session (process group) of its own, logging to a file, with the
    pool and prefetch `jobpost worker --concurrency N [--pool P]` would run
    (workers.app.worker_pool, workers.app.prefetch_multiplier)."""

    def __init__(
        self,
        env: Mapping[str, str],
        log: Path,
        *,
        name: str,
        concurrency: int,
        time_limits: tuple[float, float] | None = None,
        pool: str | None = None,
    ) -> None:
        """`time_limits`: (soft, hard) seconds instead of the app's task time limits; `pool`:
        solo, prefork or threads, as `jobpost worker --pool`."""
        env, pool = dict(env), worker_pool(concurrency, pool)
        prefetch = prefetch_multiplier(pool)
        if ":" in pool:  # given by module path: Celery's "custom" pool
            env["CELERY_CUSTOM_WORKER_POOL"], pool = pool, "custom"
        celery = [sys.executable, "-c", CELERY_WORKER]
        if time_limits is not None:
            celery = [sys.executable, "-c", LIMITED_WORKER, *map(str, time_limits)]
        command = [
            *celery,
            "-Q",
            ",".join(QUEUES),
            "--concurrency",
            str(concurrency),
            "--pool",
            pool,
            "--prefetch-multiplier",
            str(prefetch),
            "--loglevel",
            "INFO",
            "-n",
            f"{name}@%h",
            # Each test has a broker of its own: there is no neighbour to synchronise with,
            # and mingle would only add a second to every start.
            "--without-mingle",
        ]
        super().__init__(command, log, env=env, append=True, name=name)

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            return any(
                f"{self.name}@" in line and line.rstrip().endswith(" ready.")
                for line in self.text().splitlines()
            )

        self.wait_until(ready, timeout=timeout, what=f"worker {self.name} to be ready")


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
        SYNC_LEASE_SECONDS="3",  # a killed worker's sync run is handed on within seconds
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


class SinkServer(SmtpServer[SlowSink]):
    """A SlowSink on a given port (a free one by default), started when the test says so (the
    relay comes up late)."""

    def __init__(self, port: int | None = None, delay: float = 0.0) -> None:
        super().__init__(SlowSink("127.0.0.1", port or free_port(), delay))
