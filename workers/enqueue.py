"""Sending task messages. A broker that does not answer, down or hung, costs a publisher
workers.app.ENQUEUE_TIMEOUT, no more: the outbox row is already committed, and the sweeper
enqueues it later (C8)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from models.core.settings import Settings

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger("jobpost.enqueue")
DELIVER = "jobpost.deliver"
DELIVER_WEBHOOK = "jobpost.deliver_webhook"
NO_RETRY = {"max_retries": 0}


class Publisher:
    """A web process's Celery app, made when it first sends a task rather than at start:
    a process that only serves and writes jobs sends none, and Celery's app with kombu adds
    megabytes to every web worker (issue 15, docs/benchmarks.md)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._app: Celery | None = None
        self._lock = threading.Lock()  # gunicorn's sync workers have one thread; others may not

    @property
    def app(self) -> Celery:
        with self._lock:
            if self._app is None:
                from workers.app import make_celery

                self._app = make_celery(self.settings, publisher=True)
            return self._app


DELIVER_REPORT = "jobpost.deliver_report"
SYNC = "jobpost.sync"


def send(app: Celery, task: str, what: str, *args: object, **kwargs: object) -> bool:
    """Send one task message, never retried; False (logged, `what` naming the entry) when the
    broker refuses it or is down: the entry is committed, and the sweeper enqueues it."""
    try:
        app.send_task(task, args=list(args), kwargs=kwargs, retry=False, retry_policy=NO_RETRY)
    except Exception as e:  # any broker error: the sweeper will pick the entry up
        log.warning("enqueue failed for %s: %s", what, e)
        return False
    return True


def deliver(app: Celery, application_id: int, request_id: str | None = None) -> bool:
    """Enqueue the delivery of one application's copy; False (logged) when the broker is down."""
    what = f"application {application_id}"
    return send(app, DELIVER, what, application_id, request_id=request_id)


def deliver_report(app: Celery, report_id: int) -> bool:
    """Enqueue the operator's email of one fraud report (C13); False (logged) when the broker
    is down: the outbox row is committed, and the sweeper enqueues it."""
    return send(app, DELIVER_REPORT, f"report {report_id}", report_id)


def sync(app: Celery, run_id: int, request_id: str | None = None) -> bool:
    """Enqueue a sync run on its own queue (C11); False (logged) when the broker is down:
    the run is committed, and the sweeper enqueues it."""
    return send(app, SYNC, f"sync run {run_id}", run_id, request_id=request_id)


def deliver_webhooks(app: Celery, delivery_ids: list[int]) -> int:
    """Enqueue webhook deliveries (C12); returns how many went. A broker that refuses one
    is not asked for the rest: the sweeper enqueues what is left."""
    sent = 0
    for delivery_id in delivery_ids:
        if not send(app, DELIVER_WEBHOOK, f"webhook delivery {delivery_id}", delivery_id):
            break
        sent += 1
    return sent


DELIVER_ALERT_MAIL = "jobpost.deliver_alert_mail"


def deliver_alert_mail(app: Celery, mail_id: int) -> bool:
    """Enqueue one email of a job alert (C19); False (logged) when the broker is down: the
    outbox row is committed, and the sweeper enqueues it."""
    try:
        app.send_task(DELIVER_ALERT_MAIL, args=[mail_id], retry=False, retry_policy=NO_RETRY)
    except Exception as e:  # any broker error: the sweeper will pick the entry up
        log.warning("enqueue failed for alert email %s: %s", mail_id, e)
        return False
    return True


DELIVER_RECEIPT = "jobpost.deliver_receipt"


def deliver_receipt(app: Celery, receipt_id: int) -> bool:
    """Enqueue one applicant's receipt (C20); False (logged) when the broker is down: the
    outbox row is committed, and the sweeper enqueues it."""
    return send(app, DELIVER_RECEIPT, f"receipt {receipt_id}", receipt_id)


DELIVER_NOTICE = "jobpost.deliver_notice"


def deliver_notice(app: Celery, notice_id: int) -> bool:
    """Enqueue one notice of a flagged address (C22); False (logged) when the broker is
    down: the outbox row is committed, and the sweeper enqueues it."""
    return send(app, DELIVER_NOTICE, f"notice {notice_id}", notice_id)
