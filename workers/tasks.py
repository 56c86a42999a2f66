"""Celery tasks: thin, named explicitly, each opening its own unit of work."""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown
from sqlalchemy.orm import Session, sessionmaker

from models import applications, idempotency, outbox, upkeep
from models.dates import on_day, today_in, utcnow
from models.db import session_scope, sessionmaker_for
from models.settings import Settings
from workers import broker, delivery, enqueue, mail, observability  # noqa: F401  (task signals, C9)
from workers.app import celery_app

log = logging.getLogger("jobpost.tasks")


@functools.cache
def settings() -> Settings:
    return Settings.from_env()


@functools.cache
def sessions() -> sessionmaker[Session]:
    """Built lazily in each process, so no connection crosses a fork."""
    return sessionmaker_for(settings().database_url)


@worker_process_init.connect
def _forget_parent_engine(**_: Any) -> None:
    sessions.cache_clear()


@worker_process_shutdown.connect
def _quit_smtp(**_: Any) -> None:
    """A prefork child ends with os._exit, which runs no atexit hook: QUIT its connection
    here (workers.mail.RELAY; a one-process worker QUITs it at exit)."""
    mail.RELAY.close()


@celery_app.task(name="jobpost.deliver")
def deliver(application_id: int, request_id: str | None = None) -> str:
    return delivery.deliver(sessions(), settings(), application_id)


def changed(task: str, count: int, what: str) -> int:
    """Each periodic task logs what it changed, once committed, and returns the count (C9)."""
    log.info("%s: %d %s", task, count, what, extra={"periodic_task": task, "changed": count})
    return count


def run_expire(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    day = today or today_in(s.timezone)
    with session_scope(factory) as session:
        count = upkeep.expire(session, today=day)
    return changed("expire", count, f"active jobs closed before {day} archived")


def run_refresh(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    day = today or today_in(s.timezone)
    with session_scope(factory) as session:
        count = upkeep.refresh(session, today=day)
    return changed("refresh", count, f"auto-refresh jobs re-published on {day}")


def run_purge(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    """Applications past their retention (C8) and idempotency keys past their 24 hours
    (C10). With `today` (C9's `--today`), the retention is counted back from that service date at
    the present time of day in JOBPOST_TIMEZONE, as if the task ran then."""
    days = s.application_retention_days
    now = utcnow() if today is None else on_day(s.timezone, today, utcnow())
    with session_scope(factory) as session:
        count = applications.purge(session, now=now, retention_days=days)
        keys = idempotency.purge(session, now=now)  # C14: the daily purge takes them too
    what = (
        f"rows deleted ({count} finished applications older than {days} days, "
        f"{keys} idempotency keys past their 24 hours)"
    )
    return changed("purge", count + keys, what)


def run_sweep(
    factory: sessionmaker[Session], s: Settings, today: Any = None, *, celery: Celery | None = None
) -> int:
    """Enqueue what is due (through `celery`, by default this process's app); entries stay
    marked enqueued even if the broker refuses, and come round again after the grace period.
    On the embedded broker, the messages workers have taken are deleted too (the transport
    keeps them: `workers.broker.forget_taken`)."""
    with session_scope(factory) as session:
        ids = outbox.sweep(session, now=utcnow(), timing=delivery.timing(s))
    for application_id in ids:
        enqueue.deliver(celery or celery_app, application_id)
    try:
        broker.forget_taken(s.broker_url)
    except Exception as e:  # the next sweep tries again; what is due was enqueued all the same
        log.warning("sweep: cannot delete the broker's taken messages: %s", e)
    return changed("sweep", len(ids), "outbox entries enqueued")


RUNNERS = {"expire": run_expire, "refresh": run_refresh, "sweep": run_sweep, "purge": run_purge}


@celery_app.task(name="jobpost.expire")
def expire() -> int:
    return run_expire(sessions(), settings())


@celery_app.task(name="jobpost.refresh")
def refresh() -> int:
    # Expiry runs first (C5): a job past its close date must not be refreshed.
    run_expire(sessions(), settings())
    return run_refresh(sessions(), settings())


@celery_app.task(name="jobpost.sweep")
def sweep() -> int:
    return run_sweep(sessions(), settings())


@celery_app.task(name="jobpost.purge")
def purge() -> int:
    return run_purge(sessions(), settings())
