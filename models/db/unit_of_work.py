"""Sessions and the unit of work shared by the API and the workers.

Domain functions flush but never commit; whoever opened the session (the request middleware
or `session_scope`) commits once, then runs the callbacks registered with `after_commit`
(enqueueing a task only once its rows are visible to the worker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.db import feed
from models.db.engines import autocommit, database_said, make_engine, snapshot_reads

log = logging.getLogger(__name__)

AFTER_COMMIT = "jobpost.after_commit"
T = TypeVar("T")


def make_sessionmaker(
    engine: Engine, change_feed_lag: float = feed.DEFAULT_LAG_SECONDS
) -> sessionmaker[Session]:
    """Sessions on `engine`, each checking at commit that its changes kept to the change
    feeds' lag (`models.db.feed`, CHANGE_FEED_LAG_SECONDS)."""
    return sessionmaker(engine, expire_on_commit=False, info={feed.LAG: change_feed_lag})


def sessionmaker_for(
    url: str, change_feed_lag: float = feed.DEFAULT_LAG_SECONDS, **engine_options: Any
) -> sessionmaker[Session]:
    """Sessions on a new engine for `url` (tasks and commands, outside the web process)."""
    return make_sessionmaker(make_engine(url, **engine_options), change_feed_lag)


@lru_cache(maxsize=8)
def autocommit_sessions(factory: sessionmaker[Session]) -> sessionmaker[Session]:
    """Sessions for work whose statements each stand alone (a GET's reads, the steps of a
    delivery): on PostgreSQL from `autocommit(engine)`, once per factory. SQLite keeps its
    transactions, and so do sessions bound to a connection (the tests' rolled-back one)."""
    return _sessions_on(factory, autocommit)


@lru_cache(maxsize=8)
def read_sessions(factory: sessionmaker[Session]) -> sessionmaker[Session]:
    """Sessions for a GET, which reads and never commits: from `snapshot_reads(engine)`
    (autocommit on PostgreSQL, deferred transactions on a SQLite file), once per factory.
    Sessions bound to a connection (the tests' rolled-back one) are kept."""
    return _sessions_on(factory, snapshot_reads)


def _sessions_on(
    factory: sessionmaker[Session], engine_for: Callable[[Engine], Engine]
) -> sessionmaker[Session]:
    """Sessions like `factory`'s (its change feeds' lag) on `engine_for` its engine; the
    factory itself where that is its own engine, or where it is bound to a connection."""
    bind = factory.kw.get("bind")
    if not isinstance(bind, Engine):
        return factory
    engine = engine_for(bind)
    if engine is bind:
        return factory
    lag = (factory.kw.get("info") or {}).get(feed.LAG, feed.DEFAULT_LAG_SECONDS)
    return make_sessionmaker(engine, lag)


def after_commit(session: Session, callback: Callable[[], object]) -> None:
    """Run `callback` once the session's current transaction has committed."""
    session.info.setdefault(AFTER_COMMIT, []).append(callback)


def commit(session: Session) -> None:
    """Commit, then run the after-commit callbacks; a failing callback is logged, not raised."""
    session.commit()
    for callback in session.info.pop(AFTER_COMMIT, []):
        try:
            callback()
        except Exception:
            log.exception("after-commit callback failed")


def discard(session: Session) -> None:
    session.info.pop(AFTER_COMMIT, None)
    session.rollback()


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work outside requests (tasks, CLI): commit on success, roll back otherwise."""
    session = factory()
    try:
        yield session
        commit(session)
    except BaseException:
        discard(session)
        raise
    finally:
        session.close()


def commit_within_lease(
    session: Session,
    sessions: sessionmaker[Session],
    mark: Callable[[Session], T],
    *,
    lease: datetime,
    what: str,
    logger: logging.Logger = log,
) -> T:
    """`mark` in `session`, and commit; returns what `mark` returned. The work it records
    is done (a relay has the copy, a receiver the POST): a mark that fails for any reason the
    database gives (a lost connection, a lock or statement timeout, a trigger's error, a
    pooler's) is made again in a new session of `sessions` until it holds, for as long as
    the lease lasts: past it, the sweeper may hand the entry to another worker, which would
    do the work again (C8, C12). `what` names the entry in the log."""
    deadline = time.monotonic() + (lease - utcnow()).total_seconds()
    try:
        done = mark(session)
        commit(session)
        return done
    except SQLAlchemyError as e:
        failure = e
        _roll_back(session)
    pause = 0.1
    while True:
        logger.warning(
            "%s: recording it failed (%s); recording it again", what, database_said(failure)
        )
        try:
            with session_scope(sessions) as fresh:
                return mark(fresh)
        except SQLAlchemyError as e:
            failure = e
        if time.monotonic() + pause > deadline:
            raise failure
        time.sleep(pause)
        pause = min(pause * 2, 5.0)


def _roll_back(session: Session) -> None:
    """End the failed session's transaction; on a connection already lost that fails too,
    and the session is done with it all the same."""
    try:
        session.rollback()
    except SQLAlchemyError:
        log.debug("rollback after a failed mark failed too", exc_info=True)
