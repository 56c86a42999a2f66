"""What operators see of the workers (C9): `jobpost_tasks_total{task,outcome}` and one JSON
log line per task run, served on the worker's own /metrics (WORKER_METRICS_PORT).

Tasks run in prefork children, or in the worker's own process when it runs one at a time
(workers.solo); each of those processes counts into its own file in PROMETHEUS_MULTIPROC_DIR
(`jobpost worker` sets it, before anything imports prometheus_client, to a directory of the
worker's own), and the main process serves the sum. The signal handlers are connected by
`connect`, which `jobpost worker` calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from celery.signals import task_failure, task_postrun, task_prerun, worker_ready
from prometheus_client import REGISTRY, CollectorRegistry, Counter, start_http_server, values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from models.core import build, logs

log = logging.getLogger("jobpost.task")

# failed: jobpost.deliver gave a copy up (a 5xx, retries exhausted). error: a task raised
# (the database or the broker away, a time limit, a bug); a delivery's entry then comes back
# through the sweeper, so an error is no copy given up.
SUCCEEDED, RETRIED, FAILED, ERROR = "succeeded", "retried", "failed", "error"
TASKS = Counter(
    "jobpost_tasks",
    "Task runs by task name and outcome (succeeded, retried, failed, error).",
    ["task", "outcome"],
)
SYNC_ITEMS = Counter(
    "jobpost_sync_items",
    "Sync run items applied by this worker, by outcome (C11).",
    ["outcome"],
)
# What jobpost.deliver (workers.delivery) and jobpost.deliver_webhook (workers.webhooks)
# return, as an outcome; "sent", "succeeded", "skipped" and "lost" succeed. A webhook's 410
# ("disabled") gave the delivery up.
DELIVERY_TASKS = (
    "jobpost.deliver",
    "jobpost.deliver_report",
    "jobpost.deliver_receipt",
    "jobpost.deliver_notice",
    "jobpost.deliver_webhook",
)
DELIVERY_OUTCOMES = {
    "retry": RETRIED,
    "failed": FAILED,
    "disabled": FAILED,
    "undeliverable": FAILED,
}
_running: dict[str, tuple[float, Any]] = {}  # task id → (start, log context token)


def multiprocess() -> bool:
    """True when this process's metrics live in PROMETHEUS_MULTIPROC_DIR files."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


def outcome(task_name: str, state: str, retval: Any) -> str:
    if state == "SUCCESS":
        if task_name in DELIVERY_TASKS:
            return DELIVERY_OUTCOMES.get(str(retval), SUCCEEDED)
        return SUCCEEDED
    return RETRIED if state == "RETRY" else ERROR


def _request_id(kwargs: Any) -> Any:
    return kwargs.get("request_id") if isinstance(kwargs, dict) else None


def record(
    task: str,
    task_id: str | None,
    result: str,
    duration: float | None,
    retries: int,
    request_id: Any,
) -> None:
    """Count one task run and log its line."""
    TASKS.labels(task, result).inc()
    level = {SUCCEEDED: logging.INFO, RETRIED: logging.WARNING}.get(result, logging.ERROR)
    log.log(
        level,
        "task",
        extra={
            "event": "task",
            "task": task,
            "task_id": task_id,
            "outcome": result,
            "duration_ms": None if duration is None else round(duration * 1000, 3),
            "retries": retries,
            "request_id": request_id,
        },
    )


def connect(metrics_port: int) -> None:
    """Count and log every task run, and serve /metrics on `metrics_port` (WORKER_METRICS_PORT)
    once the worker is ready. Connecting again changes nothing (one handler per signal)."""
    task_prerun.connect(_started, weak=False, dispatch_uid="jobpost.task_started")
    task_postrun.connect(_finished, weak=False, dispatch_uid="jobpost.task_finished")
    task_failure.connect(_failed_elsewhere, weak=False, dispatch_uid="jobpost.task_failed")

    def serve(**_: Any) -> None:
        serve_metrics(metrics_port)

    worker_ready.connect(serve, weak=False, dispatch_uid="jobpost.worker_metrics")


def _started(task_id: str, task: Any, kwargs: Any = None, **_: Any) -> None:
    token = logs.bind(task=task.name, task_id=task_id, request_id=_request_id(kwargs))
    _running[task_id] = (time.perf_counter(), token)


def _finished(
    task_id: str, task: Any, kwargs: Any = None, retval: Any = None, state: str = "", **_: Any
) -> None:
    started, token = _running.pop(task_id, (None, None))
    if token is not None:
        logs.unbind(token)
    duration = None if started is None else time.perf_counter() - started
    retries = int(getattr(task.request, "retries", 0) or 0)
    record(
        task.name,
        task_id,
        outcome(task.name, state, retval),
        duration,
        retries,
        _request_id(kwargs),
    )


def _failed_elsewhere(
    sender: Any = None, task_id: str | None = None, kwargs: Any = None, **_: Any
) -> None:
    """A failure the running process could not report (hard time limit, a child lost): the
    main process learns of it. Failures inside a run are counted by `_finished`."""
    if task_id in _running or sender is None:
        return
    record(sender.name, task_id, ERROR, None, 0, _request_id(kwargs))


class _Default(Collector):
    """The process's own default registry, for when metrics are not shared between processes."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def metrics_registry() -> CollectorRegistry:
    """What the worker's /metrics serves: its processes' task counts, and its build."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_Default())
    registry.register(build.BuildInfo())
    return registry


def serve_metrics(port: int) -> None:
    """The worker's own /metrics on WORKER_METRICS_PORT, from the main process."""
    registry = metrics_registry()
    if not multiprocess():
        log.warning(
            "PROMETHEUS_MULTIPROC_DIR was not set when the worker started: "
            "/metrics shows the main process only (start it with `jobpost worker`)"
        )
    try:
        start_http_server(port, registry=registry)
    except OSError as e:
        log.error("worker metrics: cannot listen on port %s: %s", port, e)
        return
    log.info("worker metrics on port %s", port, extra={"port": port})
