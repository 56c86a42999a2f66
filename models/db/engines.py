"""Engines and their pools (C9 `DATABASE_URL`): a PostgreSQL connection checked before
use only when it may have gone, a connect timeout, SQLite tuned for several processes, and
the engine that reads (GET) use: autocommit on PostgreSQL, snapshots on SQLite. No engine
writes a statement's bound values into its errors or logs (`hide_parameters`): they carry
applicants' names, emails and letters, which must not reach a log line. Nor does PostgreSQL's
DETAIL, which quotes them ("Failing row contains (…)")."""

from __future__ import annotations

import fcntl
import os
import select
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.pool import QueuePool

IDLE_SINCE = "jobpost.idle_since"
IDLE_PING_SECONDS = 5.0
CONNECT_TIMEOUT = 10  # seconds, for PostgreSQL connections
# DATABASE_URL's `pooler` parameter (ours, not libpq's): the pooler between the service and
# PostgreSQL, if any, in the pool mode it runs (C9).
POOLER = "pooler"
POOL_MODES = ("session", "transaction")
# Beside a SQLite file: the writers waiting for its write lock hold a shared flock on it
# (`_waiting`, `let_writers_in`). It holds no data; deleting it loses nothing.
WRITERS_SUFFIX = "-writers"
WRITERS_WAIT_SECONDS = 2.0  # at most this long a long writer waits for them between steps


def make_engine(
    url: str,
    *,
    idle_ping_seconds: float = IDLE_PING_SECONDS,
    sqlite_begin: str = "BEGIN IMMEDIATE",
    **kwargs: Any,
) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout and write-ahead `BEGIN IMMEDIATE`
    (`sqlite_begin`: how its transactions begin)."""
    parsed = make_url(url)
    kwargs["hide_parameters"] = True
    if parsed.get_backend_name() != "sqlite":
        if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
            # A server that takes the connection and never answers would hold a request (or
            # a task) until the OS gives up, minutes later; the URL may set its own.
            connect_args = {"connect_timeout": CONNECT_TIMEOUT, **kwargs.pop("connect_args", {})}
            kwargs["connect_args"] = connect_args
        engine = create_engine(url, **kwargs)
        _ping_when_idle(engine, idle_ping_seconds)
        if parsed.get_backend_name() == "postgresql":
            _prepare_unless_pooled(engine)
            _no_detail_in_messages(engine)
        return engine
    make_sqlite_folder(url)
    engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)
    _tune_sqlite(engine, sqlite_begin)
    return engine


def _prepare_unless_pooled(engine: Engine) -> None:
    """Behind a transaction pooler (`pooler=transaction`, PgBouncer's pool_mode=transaction)
    no statement is prepared on the server. psycopg prepares a statement on its fifth run and
    names it per client connection; the pooler hands each transaction whichever server
    connection is free, where that name is unknown or another statement's. In session mode a
    client keeps its server connection, and statements are prepared as without a pooler.
    The parameter is taken out before the driver, which would refuse it, sees the URL."""

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        if params.pop(POOLER, None) == "transaction":
            params["prepare_threshold"] = None


def _no_detail_in_messages(engine: Engine) -> None:
    """Drop the DETAIL line from a database error's message (the driver's, and SQLAlchemy's
    made from it): for a constraint violation PostgreSQL writes the failing row or key into it,
    applicants' data included, and the message reaches the logs with the traceback. The
    driver's `diag` keeps every field for code that asks."""

    @event.listens_for(engine, "handle_error")
    def _strip(context: Any) -> None:
        for error in (context.original_exception, context.sqlalchemy_exception):
            if error is not None and error.args and isinstance(error.args[0], str):
                kept = [
                    line for line in error.args[0].split("\n") if not line.startswith("DETAIL:")
                ]
                error.args = ("\n".join(kept), *error.args[1:])


def make_sqlite_folder(url: str) -> None:
    """Make the folder of a SQLite URL's file (the database's, the embedded broker's), so the
    first process to open it finds one; other URLs are left alone."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


def _ping_when_idle(engine: Engine, idle_seconds: float) -> None:
    """Check a pooled connection before use: always that the server has not closed it, and
    with "SELECT 1" if it sat idle `idle_seconds`.

    A connection the server closed while pooled (a restart, an operator's
    pg_terminate_backend) would fail its next request with a 500. A server that ends a
    connection says so on it (an error message, then end of file), so its socket turns
    readable while nothing was asked: one poll, no round trip, catches that, and the pool
    connects afresh. A connection a firewall dropped silently shows nothing; the ping after
    `idle_seconds` catches it. Pinging connections in steady use too (SQLAlchemy's
    `pool_pre_ping`) would add a round trip to every request for nothing. A connection lost
    while in use still fails its request; SQLAlchemy then renews the whole pool.
    """

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info[IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(IDLE_SINCE)  # None: connected just now
        if since is None:
            return
        if _spoke_unasked(dbapi_conn):
            raise DisconnectionError("pooled connection closed by the server")
        if time.monotonic() - since < idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as e:
            raise DisconnectionError(f"pooled connection lost while idle: {e}") from e


def connection_lost(error: Exception) -> bool:
    """The database could not be reached, or the connection died: the server's state, not a
    bug of ours (a request answers 503, a delivery records its copy on a new connection)."""
    if isinstance(error, OperationalError):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


def database_said(error: Exception) -> str:
    """The first line of what the database or its driver said (a SQLAlchemy error's `orig`),
    for a log line or an operator's message; its repr when it said nothing."""
    said = str(getattr(error, "orig", None) or error).strip()
    return said.splitlines()[0] if said else repr(error)


def _spoke_unasked(dbapi_conn: Any) -> bool:
    """Whether an idle connection's socket has something to read (or is closed): between
    statements the server only speaks to end the connection. Drivers without a socket to
    look at, or systems without poll(2), are taken to be fine."""
    fileno = getattr(dbapi_conn, "fileno", None)
    if fileno is None or not hasattr(select, "poll"):
        return False
    try:
        descriptor = fileno()
    except Exception:  # the driver's own error: it holds no socket any more, so closed
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


def autocommit(engine: Engine) -> Engine:
    """An engine for requests that only read (GET): on PostgreSQL each statement commits by
    itself, which saves the BEGIN and COMMIT round trips. It has a pool of its own, so no
    connection switches modes on every checkout. SQLite keeps its transactions (its driver
    would lose our `BEGIN IMMEDIATE` handling when a pool resets the level)."""
    if engine.dialect.name == "sqlite":
        return engine
    return _sibling(engine, isolation_level="AUTOCOMMIT")


def snapshot_reads(engine: Engine) -> Engine:
    """An engine for requests that only read (GET) and never commit: on PostgreSQL
    `autocommit`; on a SQLite file one whose transactions begin deferred. In WAL mode such a
    transaction reads its snapshot and never asks for the write lock, which every other
    transaction takes first (`BEGIN IMMEDIATE`) and a writer may hold for long: a sync run
    applying its batches back to back kept reads waiting up to the busy timeout (30 s)."""
    if engine.dialect.name == "postgresql":
        return autocommit(engine)
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        return engine  # a memory database is the connection's own: no second engine sees it
    return _sibling(engine, sqlite_begin="BEGIN")


def _sibling(engine: Engine, **options: Any) -> Engine:
    """An engine on `engine`'s database, with its pool sizes and `options`. Its pool goes
    with the engine it was made from: disposing that closes both."""
    url = engine.url.render_as_string(hide_password=False)
    made = make_engine(url, **_pool_sizes(engine), **options)
    event.listen(engine, "engine_disposed", lambda _engine: made.dispose())
    return made


def _pool_sizes(engine: Engine) -> dict[str, Any]:
    """The pool sizes `engine` was made with, for an engine made from it. A worker's engine
    keeps a connection per thread (workers.app.TaskContext); its autocommit engine, which
    the deliveries use, must too: with SQLAlchemy's default 5, the connections past them
    were overflow, opened for one delivery and closed after it (engine bench, C12)."""
    pool = engine.pool
    if not isinstance(pool, QueuePool):
        return {}
    return {"pool_size": pool.size(), "max_overflow": pool._max_overflow}


def _tune_sqlite(engine: Engine, begin: str) -> None:
    # pysqlite's own transaction handling defers BEGIN and breaks SAVEPOINT; take it over.
    # BEGIN IMMEDIATE takes the write lock up front, so two processes never deadlock on a
    # read-then-write upgrade (SQLite would fail one at once instead of waiting).
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    writers = _writers_file(engine) if begin.upper() != "BEGIN" else None

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        with _waiting(writers):
            conn.exec_driver_sql(begin)


def _writers_file(engine: Engine) -> str | None:
    """The file of the writers waiting for a SQLite file's write lock; None in memory."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or database in (None, "", ":memory:"):
        return None
    return f"{database}{WRITERS_SUFFIX}"


def _open_writers(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:  # a read-only folder: writers take turns as SQLite's busy handler has it
        return None


@contextmanager
def _waiting(path: str | None) -> Iterator[None]:
    """While a transaction waits for SQLite's write lock (`BEGIN IMMEDIATE`), a shared flock
    on the writers' file says a writer waits: `let_writers_in` lets it go first."""
    fd = _open_writers(path)
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the flock: this writer holds the write lock, or gave up


def let_writers_in(
    bind: Engine | Connection, *, most_seconds: float = WRITERS_WAIT_SECONDS
) -> None:
    """Between two transactions of a long series on a SQLite file (a sync run's batches),
    outside any transaction: wait until every writer already waiting for the write lock has
    had it (up to `most_seconds`); elsewhere nothing.

    SQLite's busy handler is not fair: a waiting writer sleeps (up to 100 ms) and tries
    again, and a worker that commits a batch and begins the next at once takes the lock
    back before it wakes, batch after batch, until the run is done (a cancel, C11, then
    found it completed). Each waiting writer holds a shared flock on the writers' file
    (`_waiting`) until it has the lock; an exclusive flock is granted here only once none
    does. A lock, not a flag: it holds nothing that could disagree with the database (the
    cancel is still one transaction in it), and a crashed holder's lock goes with its file
    descriptor. PostgreSQL's row locks queue their waiters: there, and in memory, nothing
    to do.
    """
    engine = bind.engine if isinstance(bind, Connection) else bind
    fd = _open_writers(_writers_file(engine))
    if fd is None:
        return
    deadline = time.monotonic() + most_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return  # writers that keep coming do not stop the series
                time.sleep(0.005)
    finally:
        os.close(fd)
