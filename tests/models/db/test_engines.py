"""The engine's connection handling: a pooled PostgreSQL connection is checked only after it
sat idle, reads (GET) may run without a transaction on PostgreSQL, and a server that never
answers fails the connection in time; on SQLite a long series of writes lets the writers
waiting go first."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from models.db import engines
from models.db.engines import autocommit, make_engine
from tests.conftest import nowhere_url
from tests.harness import wait_for
from tests.models.conftest import backend_pid, terminate


def test_a_connection_lost_while_idle_is_replaced_before_it_is_used(postgres_url: str) -> None:
    engine = make_engine(postgres_url, idle_ping_seconds=0, pool_size=1)
    first = backend_pid(engine)
    terminate(postgres_url, first)
    assert backend_pid(engine) != first  # the ping failed; the pool connected afresh
    engine.dispose()


def test_a_connection_the_server_closed_is_replaced_with_no_round_trip(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart, or pg_terminate_backend, ends pooled connections that were in use a moment
    ago: the server says so on each, and the checkout sees it without asking anything, so
    the next request gets a fresh connection instead of a 500."""
    engine = make_engine(postgres_url, idle_ping_seconds=3600, pool_size=1)
    pings: list[object] = []
    ping = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    first = backend_pid(engine)
    assert backend_pid(engine) == first  # a live connection in steady use is kept
    terminate(postgres_url, first)
    assert backend_pid(engine) != first
    assert pings == []  # within idle_ping_seconds: no "SELECT 1" round trip
    engine.dispose()


def test_a_connection_lost_in_use_fails_its_statement_and_the_pool_renews_itself(
    postgres_url: str,
) -> None:
    engine = make_engine(postgres_url, idle_ping_seconds=3600, pool_size=1)
    with engine.connect() as conn:
        first = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        terminate(postgres_url, first)
        with pytest.raises(OperationalError):
            conn.execute(text("SELECT 1"))
    assert backend_pid(engine) != first
    engine.dispose()


def test_reads_run_without_a_transaction_on_postgresql_only(engine: Engine) -> None:
    reads = autocommit(engine)
    with reads.connect() as conn:
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        if engine.dialect.name == "postgresql":
            assert dbapi.autocommit is True
            conn.execute(text("SELECT 1"))
            assert conn.execute(text("SELECT now() = statement_timestamp()")).scalar_one()
        else:
            assert reads is engine  # SQLite keeps its BEGIN IMMEDIATE transactions
    with engine.connect() as conn:  # writers' connections are not touched
        if engine.dialect.name == "postgresql":
            assert conn.connection.dbapi_connection.autocommit is False  # type: ignore[union-attr]
            reads.dispose()


def test_disposing_an_engine_closes_its_autocommit_pool_too(postgres_url: str) -> None:
    """Reads' connections are closed with the engine's, not left to the garbage collector."""
    engine = make_engine(postgres_url)
    reads = autocommit(engine)
    with reads.connect() as conn:
        conn.execute(text("SELECT 1"))
    assert reads.pool.checkedin() == 1  # type: ignore[attr-defined]
    engine.dispose()
    assert reads.pool.checkedin() == 0  # type: ignore[attr-defined]


def test_the_autocommit_pool_keeps_as_many_connections_as_its_engine(postgres_url: str) -> None:
    """A worker's deliveries run on its autocommit engine, one connection per thread (C12):
    with SQLAlchemy's default 5 kept, the others were opened for one delivery and closed."""
    engine = make_engine(postgres_url, pool_size=8)
    reads = autocommit(engine)
    try:
        held = [reads.connect() for _ in range(8)]
        pids = set()
        for conn in held:
            pids.add(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())
            conn.close()
        assert reads.pool.checkedin() == 8  # type: ignore[attr-defined]
        again = [reads.connect() for _ in range(8)]
        assert {c.execute(text("SELECT pg_backend_pid()")).scalar_one() for c in again} == pids
        for conn in again:
            conn.close()
    finally:
        engine.dispose()


def test_a_postgresql_server_that_never_answers_fails_the_connection_in_time(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung server or a black-holed network costs a request CONNECT_TIMEOUT, not the OS's
    minutes; a URL's own connect_timeout is kept."""
    monkeypatch.setattr(engines, "CONNECT_TIMEOUT", 1)
    engine = make_engine(nowhere_url(silent_port))
    started = time.monotonic()
    with pytest.raises(OperationalError, match="timeout"):
        engine.connect()
    assert time.monotonic() - started < 5
    engine.dispose()
    own = make_engine(nowhere_url(silent_port, "connect_timeout=2"))
    assert own.dialect.create_connect_args(own.url)[1]["connect_timeout"] == "2"
    own.dispose()


@pytest.mark.parametrize(("pooler", "threshold"), [("", 5), ("session", 5), ("transaction", None)])
def test_behind_a_transaction_pooler_no_statement_is_prepared(
    postgres_url: str, pooler: str, threshold: int | None
) -> None:
    """DATABASE_URL's `pooler` (C9) is ours: the driver never sees it. Behind a transaction
    pooler the next transaction may run on another server connection, where a prepared
    statement is unknown (tests/test_pooler.py runs the service through PgBouncer); the reads'
    autocommit engine, made from the same URL, prepares none either."""
    url = make_url(postgres_url).update_query_dict({"pooler": pooler} if pooler else {})
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        for each in (engine, autocommit(engine)):
            with each.connect() as conn:
                dbapi: Any = conn.connection.dbapi_connection
                assert dbapi.prepare_threshold == threshold
                for _ in range(8):  # psycopg prepares a statement on its 5th run
                    conn.execute(text("SELECT count(*) FROM pg_class WHERE oid > :o"), {"o": 1})
                prepared = conn.execute(text("SELECT count(*) FROM pg_prepared_statements"))
                assert prepared.scalar_one() == (0 if threshold is None else 1)
                conn.rollback()
    finally:
        engine.dispose()


def test_a_long_writer_lets_the_writers_waiting_for_sqlites_lock_go_first(
    tmp_path: Path,
) -> None:
    """SQLite's busy handler is not fair: a writer that commits and begins again at once
    keeps the lock from one that sleeps between tries. `let_writers_in` returns only once
    the writer waiting meanwhile holds the lock (models.db.engines, C11)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'jobpost.db'}")
    began = threading.Event()

    def waiting_writer() -> None:
        with engine.begin() as connection:  # waits for the lock `holder` holds
            began.set()
            connection.execute(text("SELECT 1"))

    holder = engine.connect()
    holder.begin()
    writer = threading.Thread(target=waiting_writer)
    writer.start()
    try:
        wait_for(lambda: writers_waiting(tmp_path), timeout=10, what="the writer to wait")
        holder.commit()
        engines.let_writers_in(engine, most_seconds=30)
        assert began.is_set()
    finally:
        holder.close()
        writer.join()
        engine.dispose()


def test_a_writer_that_never_gets_the_lock_holds_the_long_writer_back_a_moment_only(
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'jobpost.db'}")
    stuck = os.open(tmp_path / "jobpost.db-writers", os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(stuck, fcntl.LOCK_SH)  # a writer waiting, as far as the file says
        started = time.monotonic()
        engines.let_writers_in(engine, most_seconds=0.2)
        assert time.monotonic() - started < 5
    finally:
        os.close(stuck)
        engine.dispose()


def writers_waiting(folder: Path) -> bool:
    """Whether a writer holds its shared flock on the writers' file (it waits for the lock)."""
    fd = os.open(folder / "jobpost.db-writers", os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
