"""Engine, sessions and the unit of work shared by the API and the workers.

Domain functions flush but never commit; whoever opened the session (the request middleware
or `session_scope`) commits once, then runs the callbacks registered with `after_commit`
(enqueueing a task only once its rows are visible to the worker).
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Dialect, Engine, Select, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

AFTER_COMMIT = "jobpost.after_commit"
IDLE_SINCE = "jobpost.idle_since"
KEPT_CURSOR = "jobpost.kept_cursor"  # in a pooled connection's info, by `Precompiled`
IDLE_PING_SECONDS = 5.0
CONNECT_TIMEOUT = 10  # seconds, for PostgreSQL connections


def make_engine(url: str, *, idle_ping_seconds: float = IDLE_PING_SECONDS, **kwargs: Any) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout and write-ahead `BEGIN IMMEDIATE`."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
            # A server that takes the connection and never answers would hold a request (or
            # a task) until the OS gives up, minutes later; the URL may set its own.
            connect_args = {"connect_timeout": CONNECT_TIMEOUT, **kwargs.pop("connect_args", {})}
            kwargs["connect_args"] = connect_args
        engine = create_engine(url, **kwargs)
        _ping_when_idle(engine, idle_ping_seconds)
        return engine
    make_sqlite_folder(url)
    engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)
    _tune_sqlite(engine)
    return engine


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
    url = engine.url.render_as_string(hide_password=False)
    reads = make_engine(url, isolation_level="AUTOCOMMIT")
    # Its pool goes with the engine it was made from: disposing that closes both.
    event.listen(engine, "engine_disposed", lambda _engine: reads.dispose())
    return reads


@lru_cache(maxsize=8)
def autocommit_sessions(factory: sessionmaker[Session]) -> sessionmaker[Session]:
    """Sessions for work whose statements each stand alone (a GET's reads, the steps of a
    delivery): on PostgreSQL from `autocommit(engine)`, once per factory. SQLite keeps its
    transactions, and so do sessions bound to a connection (the tests' rolled-back one)."""
    bind = factory.kw.get("bind")
    if isinstance(bind, Engine) and bind.dialect.name == "postgresql":
        return make_sessionmaker(autocommit(bind))
    return factory


def _tune_sqlite(engine: Engine) -> None:
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

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def sessionmaker_for(url: str) -> sessionmaker[Session]:
    """Sessions on a new engine for `url` (tasks and commands, outside the web process)."""
    return make_sessionmaker(make_engine(url))


class Precompiled:
    """A Core SELECT compiled once per dialect and run on the DBAPI cursor, for the reads
    that every request or every list runs (authentication, the job list): SQLAlchemy's work
    per execution (cache key, execution context, result object) costs more than the
    database's answer to them. Types still convert as SQLAlchemy converts them;
    `before_cursor_execute` listeners still see the statement; a lost connection is
    invalidated and raised as SQLAlchemy raises it, so the pool replaces it."""

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement
        self._forms: dict[str, _Form] = {}

    def first(self, connection: Connection, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row for `params`, or None."""
        rows = self._run(connection, params, many=False)
        return rows[0] if rows else None

    def all(self, connection: Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self._run(connection, params, many=True)

    def _run(
        self, connection: Connection, params: dict[str, Any], *, many: bool
    ) -> list[tuple[Any, ...]]:
        form = self._forms.get(connection.dialect.name)
        if form is None:
            form = self._forms[connection.dialect.name] = _Form(self.statement, connection.dialect)
        values = form.values(params)
        pooled = connection.connection
        kept = connection.dialect.name == "postgresql"
        cursor: Any = _kept_cursor(pooled) if kept else pooled.cursor()
        try:
            if connection.dispatch.before_cursor_execute:  # listeners see it as any statement
                connection.dispatch.before_cursor_execute(
                    connection, cursor, form.sql, values, None, False
                )
            cursor.execute(form.sql, values)
            rows = form.read(cursor, cursor.fetchall() if many else cursor.fetchmany(1))
        except connection.dialect.loaded_dbapi.Error as e:
            kept = False  # a cursor that failed is not handed out again
            pooled.info.pop(KEPT_CURSOR, None)
            lost = connection.dialect.is_disconnect(e, pooled, cursor)
            if lost:
                connection.invalidate(e)
            error = connection.dialect.loaded_dbapi.Error
            raise DBAPIError.instance(
                form.sql, values, e, error, connection_invalidated=lost, dialect=connection.dialect
            ) from e
        finally:
            if not kept:
                cursor.close()
        return rows


def _kept_cursor(pooled: Any) -> Any:
    """The cursor a pooled psycopg connection keeps for precompiled statements. Making one
    costs psycopg more than a short statement does to run (docs/benchmarks.md); its results
    are all in memory, so nothing stays open on the server between uses. SQLite gets a
    cursor per statement: one left part-read would keep its read transaction open. The pool
    clears `info` when it replaces the connection."""
    dbapi = pooled.dbapi_connection
    cursor = pooled.info.get(KEPT_CURSOR)
    if cursor is None or cursor.closed or cursor.connection is not dbapi:
        cursor = pooled.info[KEPT_CURSOR] = dbapi.cursor()
    return cursor


class _Form:
    """A statement as one dialect runs it: SQL, parameter order, type conversions."""

    def __init__(self, statement: Select[Any], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = compiled.string
        self.order = compiled.positiontup if compiled.positional else None
        self.binds = {
            name: processor
            for name, bind in compiled.binds.items()
            if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect))
        }
        self.dialect = dialect
        self.types = [column.type.dialect_impl(dialect) for column in statement.selected_columns]
        self.results: list[Any] | None = None  # from the first answer's column types

    def read(self, cursor: Any, rows: list[Any]) -> list[tuple[Any, ...]]:
        """Rows as SQLAlchemy would give them (some conversions depend on the type the
        database reports for a column, so they are settled on the first answer)."""
        if self.results is None:
            self.results = [
                kind.result_processor(self.dialect, column[1])
                for kind, column in zip(self.types, cursor.description, strict=True)
            ]
        return [self.convert(row) for row in rows]

    def values(self, params: dict[str, Any]) -> Any:
        params = {k: (p(v) if (p := self.binds.get(k)) else v) for k, v in params.items()}
        return params if self.order is None else tuple(params[k] for k in self.order)

    def convert(self, row: Any) -> tuple[Any, ...]:
        assert self.results is not None
        return tuple(v if p is None else p(v) for p, v in zip(self.results, row, strict=True))


@contextmanager
def planned_for_values(connection: Connection) -> Iterator[None]:
    """Send the statements of the block unprepared, so that PostgreSQL plans each for its own
    values. psycopg prepares a statement after a few runs, and PostgreSQL may then reuse a
    plan made for an average employer; one with 200,000 jobs needs a plan of its own. Only
    queries whose best plan depends on the employer need this: planning costs every run."""
    dbapi: Any = connection.connection.dbapi_connection
    if not hasattr(dbapi, "prepare_threshold"):  # SQLite: nothing is prepared server-side
        yield
        return
    saved = dbapi.prepare_threshold
    dbapi.prepare_threshold = None
    try:
        yield
    finally:
        dbapi.prepare_threshold = saved


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
