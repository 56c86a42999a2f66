"""The Celery app, made and configured by the entry point that runs it (C9): `jobpost worker`,
`jobpost beat`, the web process's get_app, a command that sends tasks. Nothing here runs at
import; the tasks (workers.tasks) are declared on no app and join each app made here.

Long waits between delivery attempts live in the database (next_attempt_at, read by the
sweeper), never in broker countdowns, so the Redis visibility timeout only has to outlast
one task run: a task not acknowledged within it is delivered again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from models.core.settings import Settings, is_redis
from models.db.engines import make_sqlite_folder
from models.db.unit_of_work import sessionmaker_for
from models.notifications import channels as search_engines
from models.webhooks import payloads

if TYPE_CHECKING:  # imported by make_celery: a web process reads this module's names only
    from celery import Celery

TASKS_MODULE = "workers.tasks"  # imported by a worker at start: its tasks join the app
EMAIL_QUEUE = "email"
MAINTENANCE_QUEUE = "maintenance"
SYNCS_QUEUE = "syncs"  # C11: a large run never delays the sweeper, expiry or email
# C12: webhook deliveries wait on other people's servers; on a queue of their own, a backlog
# of one employer's deliveries never stands in front of email copies or reports.
WEBHOOKS_QUEUE = "webhooks"
QUEUES = (EMAIL_QUEUE, MAINTENANCE_QUEUE, SYNCS_QUEUE, WEBHOOKS_QUEUE)  # `jobpost worker`'s
# A send is about six SMTP steps of up to SMTP_TIMEOUT (30 s) each; the limit must let one
# finish, and stay below OUTBOX_LEASE_SECONDS (default 300) so no lease runs out mid-send.
# workers.solo and prefork keep it; the threads pool cannot, so each send also has a deadline
# of its own, enforced by the task (workers.delivery.SEND_SHARE_OF_LEASE) in every pool.
TASK_TIME_LIMIT = 240
ONE_PROCESS_POOL = "workers.solo:TaskPool"
POOLS = ("solo", "prefork", "threads")  # `jobpost worker --pool` (C12's delivery engine)
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
    """Make the folder of the embedded broker's SQLite file, as models.db.engines makes the
    database's: the first process to use it (web, worker, `jobpost queues`) may find none."""
    if not url.startswith(EMBEDDED_SCHEMES):
        return
    # A folder that cannot be made is the broker's own failure to report, when it is used.
    with contextlib.suppress(OSError):
        make_sqlite_folder(url.split("+", 1)[1])  # sqla+sqlite:///var/x.sqlite → sqlite:///…


def beat_schedule(every_seconds: float | None) -> dict[str, dict[str, Any]]:
    """beat_schedule.SCHEDULE; or, given JOBPOST_BEAT_EVERY_SECONDS, every entry that often
    instead of on its own schedule. For tests and demos that want to see beat fire without
    waiting for the clock; never set it in production."""
    from beat_schedule import SCHEDULE  # Celery's crontab: only when an app is made

    if every_seconds is None:
        return SCHEDULE
    return {name: {**entry, "schedule": every_seconds} for name, entry in SCHEDULE.items()}


def worker_pool(concurrency: int, pool: str | None = None) -> str:
    """The Celery pool of a worker running `concurrency` tasks at once: `pool` if given (one
    of POOLS), else prefork for several (a child process each); for one, the tasks run in the
    worker's own process, which saves prefork's hand-off to a child and back on every task
    (workers.solo). The threads pool runs them in threads of the worker's own process."""
    chosen = pool or ("solo" if concurrency == 1 else "prefork")
    if chosen not in POOLS:
        raise ValueError(f"unknown pool {chosen!r}: one of {', '.join(POOLS)}")
    return ONE_PROCESS_POOL if chosen == "solo" else chosen


# A threads pool's worker reserves this many tasks per thread, the others one (C12's delivery
# engine). A thread acknowledges its task itself; the worker's event loop, asleep with every
# reservation taken, asks the broker for the next task only when it next wakes, and meanwhile
# the thread waits: a quarter of the threads' time in the engine bench. With a second task
# reserved per thread, a thread that finishes takes the next at once (docs/benchmarks.md).
THREADS_PREFETCH_MULTIPLIER = 2


def prefetch_multiplier(pool: str) -> int:
    """Tasks a worker running `pool` (as `worker_pool` names it) reserves per thread or
    process: `jobpost worker --prefetch-multiplier`. Reserved tasks are unacknowledged
    messages: a worker that stops or dies hands them back (C8), as it does the one it runs."""
    return THREADS_PREFETCH_MULTIPLIER if pool == "threads" else 1


class TaskContext:
    """What the tasks of one process work with, as its entry point configured them: the
    settings, and sessions on an engine made on first use in each process, so that no
    connection crosses a fork (a prefork child makes its own). Tests may hand their own."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session] | None = None) -> None:
        self.settings = settings
        self._given = sessions
        self._made: sessionmaker[Session] | None = None
        self._made_in = 0  # the pid of the process that made them
        self._lock = threading.Lock()  # the threads of a threads pool ask at once
        # Connections the engine keeps: one per task running at once (a threads pool's
        # concurrency, `size_pool`), SQLAlchemy's 5 at least.
        self.pool_size = 5

    def size_pool(self, concurrency: int) -> None:
        self.pool_size = max(5, concurrency)

    def sessions(self) -> sessionmaker[Session]:
        if self._given is not None:
            return self._given
        with self._lock:
            if self._made is None or self._made_in != os.getpid():
                if self._made is not None:  # the parent's, inherited: leave its connections be
                    engine = self._made.kw["bind"]
                    engine.dispose(close=False)
                url = self.settings.database_url
                lag = self.settings.change_feed_lag_seconds
                self._made = sessionmaker_for(url, lag, pool_size=self.pool_size)
                self._made_in = os.getpid()
            return self._made


CONTEXT = "jobpost_context"  # the attribute of an app made here that holds its TaskContext


def task_context(app: Celery) -> TaskContext:
    """The context `make_celery` gave `app`; an app made otherwise (`celery -A …` by hand)
    is refused in one line, rather than run tasks on defaults."""
    context = getattr(app, CONTEXT, None)
    if not isinstance(context, TaskContext):
        raise RuntimeError("this Celery app was not made by workers.app.make_celery")
    return context


def make_celery(
    settings: Settings,
    *,
    publisher: bool = False,
    sessions: sessionmaker[Session] | None = None,
) -> Celery:
    """An app configured from `settings`: `publisher=True` for processes that only send tasks
    (the web process); `sessions` for tests whose tasks run on sessions of their own."""
    if settings.broker_url.startswith(EMBEDDED_SCHEMES):
        _poll_embedded_broker_often()
        prepare_embedded(settings.broker_url)
    from celery import Celery

    from api import representations  # the events the tasks emit carry the API's shapes (C12)

    payloads.install(representations)
    search_engines.install(search_engines.of_settings(settings))  # C18: upkeep's, syncs'
    app = Celery("jobpost", broker=settings.broker_url, include=[TASKS_MODULE])
    setattr(app, CONTEXT, TaskContext(settings, sessions))
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
            "jobpost.deliver_report": {"queue": EMAIL_QUEUE},  # C13: the operator's email
            "jobpost.deliver_alert_mail": {"queue": EMAIL_QUEUE},  # C19: job alerts' emails
            "jobpost.deliver_receipt": {"queue": EMAIL_QUEUE},  # C20: applicants' receipts
            "jobpost.deliver_notice": {"queue": EMAIL_QUEUE},  # C22: flagged addresses
            "jobpost.deliver_webhook": {"queue": WEBHOOKS_QUEUE},  # C12
            "jobpost.sync": {"queue": SYNCS_QUEUE},
            "jobpost.*": {"queue": MAINTENANCE_QUEUE},
        },
        task_create_missing_queues=True,
        timezone=str(settings.timezone),
        enable_utc=True,
        beat_schedule=beat_schedule(settings.beat_every_seconds),
        worker_hijack_root_logger=False,
        # Task events cost a publish per task state; Flower switches them on while it watches
        # (its enable_events option), and `jobpost queues` pings workers instead.
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    return app
