"""The Celery app: settings from the environment, shared with the web process (C9).

Long waits between delivery attempts live in the database (next_attempt_at, read by the
sweeper), never in broker countdowns, so the Redis visibility timeout only has to outlast
one task run: a task not acknowledged within it is delivered again.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from beat_schedule import SCHEDULE
from models.settings import Settings

EMAIL_QUEUE = "email"
MAINTENANCE_QUEUE = "maintenance"
TASK_TIME_LIMIT = 120  # seconds; below OUTBOX_LEASE_SECONDS (default 300)
VISIBILITY_TIMEOUT = 3600  # seconds; above the time limit and any countdown (we set none)
ENQUEUE_TIMEOUT = 1.0  # C8: a broker that is down holds a request for about a second at most


def broker_options(settings: Settings) -> dict[str, Any]:
    if settings.broker_url.startswith(("redis://", "rediss://")):
        return {
            "visibility_timeout": VISIBILITY_TIMEOUT,
            "socket_connect_timeout": ENQUEUE_TIMEOUT,
            "socket_timeout": 5,
            "max_retries": 0,
        }
    return {}


def make_celery(settings: Settings) -> Celery:
    app = Celery("jobpost", broker=settings.broker_url, include=["workers.tasks"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=TASK_TIME_LIMIT,
        task_soft_time_limit=TASK_TIME_LIMIT - 20,
        broker_transport_options=broker_options(settings),
        broker_connection_timeout=ENQUEUE_TIMEOUT,
        broker_connection_retry_on_startup=True,
        task_default_queue=EMAIL_QUEUE,
        task_routes={
            "jobpost.deliver": {"queue": EMAIL_QUEUE},
            "jobpost.*": {"queue": MAINTENANCE_QUEUE},
        },
        task_create_missing_queues=True,
        timezone=str(settings.timezone),
        enable_utc=True,
        beat_schedule=SCHEDULE,
        worker_hijack_root_logger=False,
        worker_send_task_events=True,  # Flower and `jobpost queues` see the workers
        task_send_sent_event=True,
    )
    return app


celery_app = make_celery(Settings.from_env())
