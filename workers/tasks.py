"""Celery tasks: thin, named explicitly, each opening its own unit of work."""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery.signals import worker_process_init
from sqlalchemy.orm import Session, sessionmaker

from models import applications, outbox, upkeep
from models.dates import today_in, utcnow
from models.db import make_engine, make_sessionmaker, session_scope
from models.settings import Settings
from workers import delivery, enqueue
from workers.app import celery_app

log = logging.getLogger("jobpost.tasks")


@functools.cache
def settings() -> Settings:
    return Settings.from_env()


@functools.cache
def sessions() -> sessionmaker[Session]:
    """Built lazily in each process, so no connection crosses a fork."""
    return make_sessionmaker(make_engine(settings().database_url))


@worker_process_init.connect
def _forget_parent_engine(**_: Any) -> None:
    sessions.cache_clear()


@celery_app.task(name="jobpost.deliver")
def deliver(application_id: int, request_id: str | None = None) -> str:
    return delivery.deliver(sessions(), settings(), application_id)


def run_expire(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    with session_scope(factory) as session:
        return upkeep.expire(session, today=today or today_in(s.timezone))


def run_refresh(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    with session_scope(factory) as session:
        return upkeep.refresh(session, today=today or today_in(s.timezone))


def run_purge(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    with session_scope(factory) as session:
        return applications.purge(
            session, now=utcnow(), retention_days=s.application_retention_days
        )


def run_sweep(factory: sessionmaker[Session], s: Settings, today: Any = None) -> int:
    """Enqueue what is due; entries stay marked enqueued even if the broker refuses, and
    come round again after the grace period."""
    with session_scope(factory) as session:
        ids = outbox.sweep(session, now=utcnow(), timing=delivery.timing(s))
    for application_id in ids:
        enqueue.deliver(celery_app, application_id)
    return len(ids)


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
