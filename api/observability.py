"""What operators see of the web process (C9): request metrics, one JSON log line per
request, and GET /metrics.

Under gunicorn the workers share their metrics through files in PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode; `jobpost serve` sets it up before the workers fork), so
any worker answers a scrape with the sum of all. Outbox and queue figures are read from the
database and the broker when scraped; a source that does not answer is left out, and
`jobpost_metrics_source_up{source}` says so.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import falcon
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from models import reports
from models.alerts import mails as alert_mails
from models.applications import bounces, outbox, receipts
from models.core import build, logs
from models.core.dates import utcnow
from models.db import heartbeats
from models.notifications import queue as search_notifications
from models.syncs import processing as sync_work
from models.webhooks import delivery as webhook_delivery

QueueDepths = Callable[[], dict[str, int]]
access_log = logging.getLogger("jobpost.access")
log = logging.getLogger("jobpost.metrics")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"

REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
)
DURATION = Histogram(
    "http_request_duration_seconds",
    "Time to answer an HTTP request, by method and route template.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class Observe:
    """First in the middleware list: its process_response runs last and sees the final status.
    The request id (set by RequestId) is bound to the log context once routing is done, so
    every line logged while handling the request carries it."""

    def __init__(self, metrics_dir: str) -> None:
        if multiprocess():  # gunicorn run by hand: the directory may not exist yet
            os.makedirs(metrics_dir, exist_ok=True)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = time.perf_counter()

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
    ) -> None:
        req.context.log_token = logs.bind(request_id=getattr(req.context, "request_id", None))

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        token = getattr(req.context, "log_token", None)
        if token is not None:
            logs.unbind(token)
        started = getattr(req.context, "started", None)
        elapsed = time.perf_counter() - started if started is not None else 0.0
        method = req.method if req.method in METHODS else "OTHER"
        route = req.uri_template or UNMATCHED  # the template, never the raw path
        status = resp.status_code
        try:
            REQUESTS.labels(method, route, str(status)).inc()
            DURATION.labels(method, route).observe(elapsed)
        except Exception:  # metrics must never cost a request its answer
            log.exception("metrics: cannot record the request")
        access = getattr(req.context, "access", None)
        access_log.log(
            logging.ERROR if status >= 500 else logging.INFO,
            "request",
            extra={
                "event": "request",
                "request_id": getattr(req.context, "request_id", None),
                "employer_id": getattr(access, "employer_id", None),
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
            },
        )


# One pool a source, so that reads stuck on a silent database never hold up the broker's.
_database_reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="metrics-database")
_broker_reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="metrics-broker")


def _by_status(name: str, documentation: str, counts: dict[str, int]) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation, labels=["status"])
    for status, n in counts.items():
        gauge.add_metric([status], n)
    return gauge


class StateCollector(Collector):
    """Outbox and queue figures, read at scrape time from the database and the broker."""

    def __init__(
        self, sessions: sessionmaker[Session], queue_depths: QueueDepths | None, timeout: float
    ) -> None:
        self.sessions, self.queue_depths, self.timeout = sessions, queue_depths, timeout

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "jobpost_metrics_source_up",
            "1 when the source answered this scrape, 0 when its figures are missing.",
            labels=["source"],
        )
        yield from self._outbox(up)
        if self.queue_depths is not None:
            yield from self._queues(up)
        yield up

    def _outbox(self, up: GaugeMetricFamily) -> Iterator[Metric]:
        try:
            read = _database_reads.submit(self._read_outbox).result(timeout=self.timeout)
        except Exception as e:  # a timeout included: the scrape still answers
            log.warning("metrics: database did not answer: %s", str(e) or type(e).__name__)
            up.add_metric(["database"], 0)
            return
        up.add_metric(["database"], 1)
        (
            (counts, age),
            (hooks, hooks_age),
            runs,
            (reported, mails),
            beats,
            told,
            alerted,
            sent,
            (bounced, dropped, noticed),
        ) = read
        entries = GaugeMetricFamily(
            "jobpost_outbox_entries",
            "Outbox entries (copies to email), by status.",
            labels=["status"],
        )
        for status, n in counts.items():
            entries.add_metric([status], n)
        yield entries
        yield GaugeMetricFamily(
            "jobpost_outbox_oldest_pending_seconds",
            "Age of the oldest application whose copy is not delivered yet (0 when none).",
            value=age,
        )
        deliveries = GaugeMetricFamily(
            "jobpost_webhook_deliveries",
            "Webhook deliveries, by status (C12).",
            labels=["status"],
        )
        for status, n in hooks.items():
            deliveries.add_metric([status], n)
        yield deliveries
        yield GaugeMetricFamily(
            "jobpost_webhook_oldest_pending_seconds",
            "Age of the oldest webhook delivery not finished yet (0 when none, C12).",
            value=hooks_age,
        )
        syncs_by_status = GaugeMetricFamily(
            "jobpost_syncs", "Sync runs (C11), by status.", labels=["status"]
        )
        for status, n in runs.items():
            syncs_by_status.add_metric([status], n)
        yield syncs_by_status
        yield _by_status("jobpost_job_reports", "Fraud reports (C13), by status.", reported)
        yield _by_status(
            "jobpost_report_mails",
            "The operator's emails of fraud reports (C13), by status, as the outbox's.",
            mails,
        )
        by_kind = GaugeMetricFamily(
            "jobpost_alert_mails",
            "The emails of job alerts (C19), by kind (confirm, digest) and status, as the "
            "outbox's.",
            labels=["kind", "status"],
        )
        for (kind, status), n in alerted.items():
            by_kind.add_metric([kind, status], n)
        yield by_kind
        yield _by_status(
            "jobpost_receipts",
            "The applicants' receipts (C20), by status, as the outbox's.",
            sent,
        )
        last_success = GaugeMetricFamily(
            "jobpost_periodic_task_last_success_timestamp_seconds",
            "When each periodic task last succeeded, in seconds since the epoch (C9); a task "
            "that never succeeded is absent.",
            labels=["task"],
        )
        for task, at in sorted(beats.items()):
            last_success.add_metric([task], at.timestamp())
        yield last_success
        notifications = GaugeMetricFamily(
            "jobpost_search_notifications",
            "Search-engine notifications (C18), by channel and status.",
            labels=["channel", "status"],
        )
        for channel, by_status in told.items():
            for status, n in by_status.items():
                notifications.add_metric([channel, status], n)
        yield notifications
        yield from _bounces(bounced, dropped)
        yield _by_status(
            "jobpost_address_notices",
            "The emails of flagged addresses to employers (C22), by status, as the outbox's.",
            noticed,
        )

    def _read_outbox(
        self,
    ) -> tuple[
        tuple[dict[str, int], float],
        tuple[dict[str, int], float],
        dict[str, int],
        tuple[dict[str, int], dict[str, int]],
        dict[str, datetime],
        dict[str, dict[str, int]],
        dict[tuple[str, str], int],
        dict[str, int],
        tuple[dict[tuple[bool, str], int], dict[str, int], dict[str, int]],
    ]:
        """The outbox's figures, the webhook deliveries' (C12), the sync runs' (C11), the
        fraud reports' and their emails' (C13), the periodic tasks' last successes (C9), the
        search-engine notifications (C18), the job alerts' emails (C19) and the receipts (C20)."""
        now = utcnow()
        with self.sessions() as session:
            return (
                (outbox.counts(session), outbox.oldest_pending_age(session, now=now)),
                (
                    webhook_delivery.counts(session),
                    webhook_delivery.oldest_pending_age(session, now=now),
                ),
                sync_work.counts_by_status(session.connection()),
                (reports.counts(session), outbox.counts(session, outbox.REPORTS)),
                heartbeats.last_successes(session),
                search_notifications.counts(session),  # C18
                alert_mails.counts(session),  # C19
                receipts.counts(session),  # C20
                bounces.counts(session),  # C22
            )

    def _queues(self, up: GaugeMetricFamily) -> Iterator[Metric]:
        assert self.queue_depths is not None
        try:
            depths = _broker_reads.submit(self.queue_depths).result(timeout=self.timeout)
        except Exception as e:  # a timeout included: the scrape still answers
            log.warning("metrics: broker did not answer: %s", type(e).__name__)
            up.add_metric(["broker"], 0)
            return
        up.add_metric(["broker"], 1)
        queues = GaugeMetricFamily(
            "jobpost_queue_length", "Task messages waiting in each Celery queue.", labels=["queue"]
        )
        for name, n in depths.items():
            queues.add_metric([name], n)
        yield queues


def _bounces(bounced: dict[tuple[bool, str], int], dropped: dict[str, int]) -> Iterator[Metric]:
    """C22: the bounces recorded, every reason named, and what the receiver dropped."""
    recorded = GaugeMetricFamily(
        "jobpost_bounces",
        "Failures reported of the employers' copies (C22), by permanence and reason.",
        labels=["permanent", "reason"],
    )
    for permanent in (True, False):
        for reason in bounces.REASONS:
            recorded.add_metric(
                [str(permanent).lower(), reason], bounced.get((permanent, reason), 0)
            )
    yield recorded
    drops = GaugeMetricFamily(
        "jobpost_bounces_dropped",
        "Messages the bounce receiver took and dropped (C22), by reason.",
        labels=["reason"],
    )
    for reason in bounces.DROP_REASONS:
        drops.add_metric([reason], dropped.get(reason, 0))
    yield drops


class _Default(Collector):
    """The process's own default registry, for when metrics are not shared between processes."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def multiprocess() -> bool:
    """True when this process's metrics live in PROMETHEUS_MULTIPROC_DIR files (the variable
    was set before prometheus_client was imported)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


class Metrics:
    """GET /metrics: every worker's request metrics, plus the outbox and the queues."""

    def __init__(self, state: StateCollector) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        registry = CollectorRegistry(auto_describe=False)
        if multiprocess():
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        else:
            registry.register(_Default())
        registry.register(self.state)
        registry.register(build.BuildInfo())
        resp.data = scrape(registry)
        resp.content_type = CONTENT_TYPE_PLAIN_0_0_4


def scrape(registry: CollectorRegistry) -> bytes:
    """The registry as Prometheus text. The master folds a dead worker's files into one
    (`api.server.fold_dead`): one it removed between the listing of the folder and its
    reading is a FileNotFoundError, and the scrape is made again, from a new listing."""
    try:
        return generate_latest(registry)
    except FileNotFoundError:
        return generate_latest(registry)
