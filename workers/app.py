"""The Celery app: settings from the environment, shared with the web process (C9).

Long waits between delivery attempts live in the database (next_attempt_at, read by the
sweeper), never in broker countdowns, so the Redis visibility timeout only has to outlast
one task run: a task not acknowledged within it is delivered again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from celery import Celery

from beat_schedule import SCHEDULE
from models.engines import make_sqlite_folder
from models.settings import Settings, is_redis

EMAIL_QUEUE = "email"
MAINTENANCE_QUEUE = "maintenance"
# A send is about six SMTP steps of up to SMTP_TIMEOUT (30 s) each; the limit must let one
# finish, and stay below OUTBOX_LEASE_SECONDS (default 300) so no lease runs out mid-send.
# Both pools a worker may run keep it (workers.solo for one process, prefork for several).
TASK_TIME_LIMIT = 240
ONE_PROCESS_POOL = "workers.solo:TaskPool"
VISIBILITY_TIMEOUT = 3600  # seconds; above the time limit and any countdown (we set none)
# C8: a broker that hangs or is down holds an application's POST this long, then the outbox
# keeps the copy for the sweeper; a worker, which can wait, connects with a second to spare.
ENQUEUE_TIMEOUT = 0.15
CONNECT_TIMEOUT = 1.0
# kombu's SQLAlchemy transport is polled, and a worker whose prefetch is full waits a whole
# interval (1 s by default) before asking again: one task per second at most, unless shorter.
EMBEDDED_POLLING_INTERVAL = 0.1
EMBEDDED_SCHEMES = ("sqla+", "sqlalchemy+")


def broker_options(settings: Settings, *, publisher: bool = False) -> dict[str, Any]:
    """Redis options. A publisher (the web process) gives up on a silent broker within about
    ENQUEUE_TIMEOUT; a worker, which blocks on the queue, keeps a longer socket timeout."""
    if is_redis(settings.broker_url):
        return {
            "visibility_timeout": VISIBILITY_TIMEOUT,
            "socket_connect_timeout": ENQUEUE_TIMEOUT if publisher else CONNECT_TIMEOUT,
            "socket_timeout": ENQUEUE_TIMEOUT if publisher else 5,
            "max_retries": 0,
        }
    return {}


def _poll_embedded_broker_often() -> None:
    """The interval can only be set on the class: kombu hands every transport option of its
    SQLAlchemy transport to create_engine, which refuses `polling_interval`."""
    from kombu.transport import sqlalchemy as embedded

    embedded.Transport.polling_interval = EMBEDDED_POLLING_INTERVAL


def prepare_embedded(url: str) -> None:
    """Make the folder of the embedded broker's SQLite file, as models.engines makes the
    database's: the first process to use it (web, worker, `jobpost queues`) may find none."""
    if not url.startswith(EMBEDDED_SCHEMES):
        return
    # A folder that cannot be made is the broker's own failure to report, when it is used.
    with contextlib.suppress(OSError):
        make_sqlite_folder(url.split("+", 1)[1])  # sqla+sqlite:///var/x.sqlite → sqlite:///…


def schedule_from_env(env: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """beat_schedule.SCHEDULE; or, when JOBPOST_BEAT_EVERY_SECONDS=N is set, every entry every
    N seconds instead of its own schedule. For tests and demos that want to see beat fire without
    waiting for the clock; never set it in production."""
    every = (os.environ if env is None else env).get("JOBPOST_BEAT_EVERY_SECONDS", "").strip()
    if not every:
        return SCHEDULE
    seconds = float(every)
    if seconds <= 0:
        raise ValueError("JOBPOST_BEAT_EVERY_SECONDS must be a positive number of seconds")
    return {name: {**entry, "schedule": seconds} for name, entry in SCHEDULE.items()}


def worker_pool(concurrency: int) -> str:
    """The pool of a worker running `concurrency` tasks at once: prefork for several (a
    child process each); for one, the tasks run in the worker's own process, which saves
    prefork's hand-off to a child and back on every task (workers.solo)."""
    return ONE_PROCESS_POOL if concurrency == 1 else "prefork"


def make_celery(settings: Settings, *, publisher: bool = False) -> Celery:
    """The app; `publisher=True` for processes that only send tasks (the web process)."""
    if settings.broker_url.startswith(EMBEDDED_SCHEMES):
        _poll_embedded_broker_often()
        prepare_embedded(settings.broker_url)
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
        broker_transport_options=broker_options(settings, publisher=publisher),
        broker_connection_timeout=ENQUEUE_TIMEOUT if publisher else CONNECT_TIMEOUT,
        broker_connection_retry_on_startup=True,
        task_default_queue=EMAIL_QUEUE,
        task_routes={
            "jobpost.deliver": {"queue": EMAIL_QUEUE},
            "jobpost.*": {"queue": MAINTENANCE_QUEUE},
        },
        task_create_missing_queues=True,
        timezone=str(settings.timezone),
        enable_utc=True,
        beat_schedule=schedule_from_env(),
        worker_hijack_root_logger=False,
        # Task events cost a publish per task state; Flower switches them on while it watches
        # (its enable_events option), and `jobpost queues` pings workers instead.
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    return app


celery_app = make_celery(Settings.from_env())
