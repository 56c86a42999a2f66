"""The long-running commands: `jobpost serve`, `worker`, `beat`, `bounces` and `dev` (C9).
Each is the entry point of its process: it makes what the process runs from the settings
`main` read.

Nothing here imports prometheus_client at import time: `serve` and `worker` set
PROMETHEUS_MULTIPROC_DIR first (api.server.prepare_metrics_dir).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from models.core.settings import Settings
from models.webhooks.secrets import ensure_key_file
from workers.cli.command import Command
from workers.cli.webhooks import key_needed

if TYPE_CHECKING:  # Celery's app module, imported by `jobpost serve`'s master, would weigh on
    from celery import Celery  # every web worker it forks (issue 15)

# A line per task each at INFO ("received", "succeeded"), saying what our own line says.
CELERY_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")
# A node name of this process's own: two workers on one host named alike (Celery's default,
# celery@<host>) answer `jobpost queues` as one, with a DuplicateNodenameWarning.
DEFAULT_NODE_NAME = "jobpost-{pid}@%h"


def serve(args: argparse.Namespace, command: Command) -> int:
    from api.server import serve as run

    settings = command.settings
    key_needed(command)
    run(
        args.host,
        args.port,
        args.workers,
        metrics_dir=settings.prometheus_multiproc_dir,
        cmd_args=settings.gunicorn_cmd_args,
        public_base_url=settings.public_base_url,
    )
    return 0


def worker(args: argparse.Namespace, command: Command) -> int:
    from api.server import prepare_metrics_dir
    from workers.app import QUEUES, prefetch_multiplier, worker_pool

    settings = command.settings
    key_needed(command)
    # The processes that run tasks count them into files of this worker's own (C9), so this
    # is set before workers.observability imports prometheus_client and before any pool forks.
    port = settings.worker_metrics_port
    prepare_metrics_dir(Path(settings.prometheus_multiproc_dir) / f"worker-{port}")
    concurrency = args.concurrency or os.cpu_count() or 1
    if args.pool == "solo" and concurrency != 1:
        raise SystemExit("jobpost worker: --pool solo runs one task at a time (--concurrency 1)")
    # A task run logs one JSON line of ours (workers.observability, C9); Celery's "received"
    # and "succeeded" lines at INFO would add two per task saying the same, and cost about as
    # much to write. Its warnings and errors still pass.
    for name in CELERY_TASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    name = args.name or DEFAULT_NODE_NAME.format(pid=os.getpid())
    queues = ",".join(args.queues or QUEUES)
    pool = worker_pool(concurrency, args.pool)
    options = ["-Q", queues, "--loglevel", "INFO", "--concurrency", str(concurrency), "-n", name]
    options += ["--prefetch-multiplier", str(prefetch_multiplier(pool))]
    worker_app(settings, pool=pool).worker_main(["worker", *options])
    return 0


def worker_app(settings: Settings, *, pool: str | None = None) -> Celery:
    """The Celery app of a worker process: made from `settings`, with the signal handlers of
    the tasks and of their metrics connected. `jobpost worker` runs a worker on it; so do
    tests that start workers of their own, with Celery options of theirs."""
    from workers import observability, tasks
    from workers.app import make_celery

    app = make_celery(settings)
    if pool is not None:  # Celery takes a pool given by module path from its configuration
        app.conf.worker_pool = pool
    tasks.connect()
    observability.connect(settings.worker_metrics_port)
    return app


def beat(args: argparse.Namespace, command: Command) -> int:
    from workers.app import make_celery

    settings = command.settings
    settings.var_dir.mkdir(parents=True, exist_ok=True)
    schedule = str(settings.var_dir / "celerybeat-schedule")
    make_celery(settings).start(["beat", "--loglevel", "INFO", "--schedule", schedule])
    return 0


def bounces(args: argparse.Namespace, command: Command) -> int:
    """The bounce receiver (C22): for BOUNCE_DOMAIN, with the key the workers sign with."""
    from models.applications.bounces import verp_key
    from models.webhooks.secrets import load_key
    from workers import enqueue
    from workers.bounces import Receiver, serve

    settings = command.settings
    if settings.bounce_domain is None:
        raise ValueError("jobpost bounces: set BOUNCE_DOMAIN, the domain whose mail it takes")
    key_needed(command)
    celery = command.celery

    def deliveries(ids: list[int]) -> object:
        return enqueue.deliver_webhooks(celery, ids)

    receiver = Receiver(
        command.sessions, settings.bounce_domain, verp_key(load_key(settings)), deliveries
    )
    return serve(receiver, args.host, args.port)


def dev(args: argparse.Namespace, command: Command) -> int:
    try:
        from workers.dev import run
    except ModuleNotFoundError as e:  # the image installs no dev extra (issue 27)
        if e.name != "aiosmtpd":
            raise
        raise SystemExit(
            "jobpost dev: its mail sink needs aiosmtpd, a development tool this install lacks: "
            "`make install`, or `pip install 'jobpost[dev]'`"
        ) from None

    settings = command.settings
    ensure_key_file(settings)  # webhook secrets need a key; a local service makes its own
    return run(
        args.host,
        args.port,
        settings.smtp_host,
        settings.smtp_port,
        settings.var_dir,
        settings.public_base_url,
    )
