"""`jobpost worker` (C9): the Celery options it starts a worker with. Two workers on one
host must not share a node name (tests/workers/test_operations.py starts two for real)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
from pathlib import Path

import pytest
import yaml

import api.server
from models.core.settings import Settings
from workers.cli import parser, services
from workers.cli.command import Command


class App:
    """In place of the worker's Celery app: records what `jobpost worker` would run."""

    def __init__(self, started: list[list[str]]) -> None:
        self.started = started

    def worker_main(self, argv: list[str]) -> None:
        self.started.append(argv)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The Celery worker options `jobpost worker` would run a worker with, instead of one."""
    options: list[list[str]] = []
    monkeypatch.setattr(api.server, "prepare_metrics_dir", str)
    monkeypatch.setattr(services, "worker_app", lambda settings, pool=None: App(options))
    for name in services.CELERY_TASK_LOGGERS:  # `jobpost worker` quiets them
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    return options


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["worker"], f"jobpost-{os.getpid()}@%h"),  # Celery puts the host name for %h
        (["worker", "--name", "mail-1@%h"], "mail-1@%h"),
    ],
)
def test_a_worker_is_named_by_its_pid_unless_told_otherwise(
    started: list[list[str]], tmp_path: Path, argv: list[str], name: str
) -> None:
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    assert services.worker(parser().parse_args(argv), Command(settings)) == 0
    [options] = started
    assert options[options.index("-n") + 1] == name


@pytest.mark.parametrize(
    ("argv", "pool", "prefetch"),
    [
        (["worker", "--concurrency", "1"], "workers.solo:TaskPool", "1"),
        (["worker", "--concurrency", "4"], "prefork", "1"),
        (["worker", "--pool", "threads", "--concurrency", "16"], "threads", "2"),
        (["worker", "--pool", "prefork", "--concurrency", "1"], "prefork", "1"),
        (["worker", "--pool", "solo"], "workers.solo:TaskPool", "1"),
    ],
)
def test_the_pool_is_the_one_asked_for_else_chosen_by_concurrency(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str], pool: str, prefetch: str
) -> None:
    """C12's delivery engine: `--pool threads` overlaps network waits in one process, and
    reserves a second task per thread (workers.app.prefetch_multiplier); the others one."""
    pools: list[str | None] = []
    started: list[list[str]] = []

    def worker_app(settings: Settings, pool: str | None = None) -> App:
        pools.append(pool)
        return App(started)

    monkeypatch.setattr(api.server, "prepare_metrics_dir", str)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # the default concurrency, here and in CI
    monkeypatch.setattr(services, "worker_app", worker_app)
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    assert services.worker(parser().parse_args(argv), Command(settings)) == 0
    assert pools == [pool]
    [options] = started
    assert options[options.index("--prefetch-multiplier") + 1] == prefetch


def test_a_solo_pool_of_several_tasks_at_once_is_refused(tmp_path: Path) -> None:
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    args = parser().parse_args(["worker", "--pool", "solo", "--concurrency", "4"])
    with pytest.raises(SystemExit, match="--pool solo runs one task at a time"):
        services.worker(args, Command(settings))


@pytest.mark.parametrize(
    ("argv", "queues"),
    [
        (["worker"], "email,maintenance,syncs,webhooks"),
        (["worker", "--queues", "webhooks"], "webhooks"),
        (["worker", "--queues", "email, maintenance"], "email,maintenance"),
    ],
)
def test_a_worker_consumes_every_queue_unless_told_which(
    started: list[list[str]], tmp_path: Path, argv: list[str], queues: str
) -> None:
    """C12: webhooks have a queue of their own, which a worker consumes by default."""
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    assert services.worker(parser().parse_args(argv), Command(settings)) == 0
    [options] = started
    assert options[options.index("-Q") + 1] == queues


def test_an_unknown_queue_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["worker", "--queues", "email,mail"])
    assert "name some of email, maintenance, syncs, webhooks" in capsys.readouterr().err


def _worker_options(command: list[str]) -> argparse.Namespace:
    return parser().parse_args(command[command.index("worker") :])


def test_the_shipped_workers_have_more_slots_than_one_employer_may_hold() -> None:
    """C12: compose's and the Procfile's workers consume webhooks with more tasks at once than
    WEBHOOK_EMPLOYER_IN_FLIGHT, so one employer's slow receivers never hold every slot."""
    root = Path(__file__).resolve().parents[2]
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    procfile = dict(
        line.split(":", 1) for line in (root / "Procfile").read_text().splitlines() if line
    )
    cap = Settings.from_env({}).webhook_employer_in_flight
    for command in (compose["services"]["worker"]["command"], shlex.split(procfile["worker"])):
        args = _worker_options(command)
        assert args.queues is None or "webhooks" in args.queues, command
        assert (args.concurrency or 1) > cap, command
