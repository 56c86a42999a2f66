"""The engine's connection handling: a pooled PostgreSQL connection is checked only after it
sat idle, reads (GET) may run without a transaction on PostgreSQL, and the job list is planned
for its employer's own values."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from alembic import command
from sqlalchemy import (
    Engine,
    Integer,
    Select,
    bindparam,
    create_engine,
    insert,
    inspect,
    literal,
    literal_column,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from models import db, employers, jobs
from models.db import Precompiled, autocommit, make_engine
from models.entities import Employer
from models.migrate import alembic_config, upgrade
from tests.conftest import nowhere_url
from tests.services import scratch_postgres

NOW = datetime(2026, 11, 22, 9, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with scratch_postgres() as url:
        yield url


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        pid: int = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        return pid


def _terminate(url: str, pid: int) -> None:
    """What a server restart or a firewall does to an idle connection."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        for _ in range(100):  # the backend is gone once it leaves pg_stat_activity
            gone = conn.execute(
                text("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = :p"), {"p": pid}
            ).scalar_one()
            if gone:
                break
            conn.execute(text("SELECT pg_sleep(0.02)"))
    admin.dispose()


def test_a_connection_lost_while_idle_is_replaced_before_it_is_used(postgres_url: str) -> None:
    engine = make_engine(postgres_url, idle_ping_seconds=0, pool_size=1)
    first = _backend_pid(engine)
    _terminate(postgres_url, first)
    assert _backend_pid(engine) != first  # the ping failed; the pool connected afresh
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
    first = _backend_pid(engine)
    assert _backend_pid(engine) == first  # a live connection in steady use is kept
    _terminate(postgres_url, first)
    assert _backend_pid(engine) != first
    assert pings == []  # within idle_ping_seconds: no "SELECT 1" round trip
    engine.dispose()


def test_a_connection_lost_in_use_fails_its_statement_and_the_pool_renews_itself(
    postgres_url: str,
) -> None:
    engine = make_engine(postgres_url, idle_ping_seconds=3600, pool_size=1)
    with engine.connect() as conn:
        first = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        _terminate(postgres_url, first)
        with pytest.raises(OperationalError):
            conn.execute(text("SELECT 1"))
    assert _backend_pid(engine) != first
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


def _prepared(session: Session, fragment: str) -> int:
    query = text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :f")
    return int(session.execute(query, {"f": f"%{fragment}%"}).scalar_one())


def test_the_job_list_is_planned_for_its_employer_every_time(engine: Engine) -> None:
    """C6 on a skewed table: the list's statements are never prepared (a prepared plan may be
    one made for an average employer), while the other statements still are."""
    if engine.dialect.name != "postgresql":
        assert engine.dialect.name == "sqlite"  # SQLite plans every statement afresh anyway
        return
    with Session(engine) as session:
        employer = employers.create_employer(session, "Maple Corp")
        for _ in range(8):  # psycopg prepares a statement on its 5th run
            jobs.listing(
                session.connection(), employer.id, q="baker", status=None, page=1, page_size=10
            )
            session.execute(select(Employer.name).where(Employer.id == employer.id)).scalar_one()
        assert _prepared(session, "count(jobs.id)") == 0
        assert _prepared(session, "SELECT employers.name") == 1
        session.rollback()


def test_a_precompiled_statement_answers_as_sqlalchemy_does(engine: Engine) -> None:
    """Same values and types (UTC datetimes from SQLite's text included), either paramstyle."""
    statement = (
        select(Employer.id, Employer.name, Employer.created_at)
        .where(Employer.name == bindparam("name"))
        .order_by(Employer.id)
    )
    precompiled = Precompiled(cast("Select[Any]", statement))
    with engine.connect() as conn:
        conn.execute(insert(Employer).values(name="Précompilé", plan="standard", created_at=NOW))
        expected = conn.execute(statement, {"name": "Précompilé"}).first()
        row = precompiled.first(conn, {"name": "Précompilé"})
        assert expected is not None and row == tuple(expected)
        assert row[2] == NOW and row[2].tzinfo is not None
        assert precompiled.first(conn, {"name": "nobody"}) is None
        conn.rollback()


def test_a_precompiled_statement_that_fails_leaves_the_connection_fit(postgres_url: str) -> None:
    """On PostgreSQL the statements share the connection's one kept cursor (making a cursor
    costs more than the key's lookup); one that fails is dropped, and the next statement on
    that connection gets a fresh cursor and its answer."""
    reads = autocommit(make_engine(postgres_url, pool_size=1))
    ratio = Precompiled(select(literal_column("1") / bindparam("d", type_=Integer)))
    with reads.connect() as conn:
        assert ratio.first(conn, {"d": 1}) == (1,)
        kept = conn.connection.info[db.KEPT_CURSOR]
        assert ratio.first(conn, {"d": 1}) == (1,)
        assert conn.connection.info[db.KEPT_CURSOR] is kept
        with pytest.raises(DBAPIError, match="division by zero") as raised:
            ratio.first(conn, {"d": 0})
        assert not raised.value.connection_invalidated
        assert db.KEPT_CURSOR not in conn.connection.info and kept.closed
        assert ratio.first(conn, {"d": 1}) == (1,)
        assert conn.connection.info[db.KEPT_CURSOR] is not kept
    reads.dispose()


def test_a_connection_lost_under_a_precompiled_statement_is_replaced(postgres_url: str) -> None:
    """As for any statement: the error is SQLAlchemy's, flagged a disconnect, and the pool
    connects afresh instead of handing the dead connection out again."""
    engine = make_engine(postgres_url, idle_ping_seconds=3600, pool_size=1)
    with engine.connect() as conn:  # lost while in use: the checkout's check is behind it
        first = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        _terminate(postgres_url, first)
        with pytest.raises(DBAPIError) as raised:
            Precompiled(select(literal(1, literal_execute=True))).first(conn, {})
    assert raised.value.connection_invalidated
    assert _backend_pid(engine) != first
    engine.dispose()


def test_a_postgresql_server_that_never_answers_fails_the_connection_in_time(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung server or a black-holed network costs a request CONNECT_TIMEOUT, not the OS's
    minutes; a URL's own connect_timeout is kept."""
    monkeypatch.setattr(db, "CONNECT_TIMEOUT", 1)
    engine = make_engine(nowhere_url(silent_port))
    started = time.monotonic()
    with pytest.raises(OperationalError, match="timeout"):
        engine.connect()
    assert time.monotonic() - started < 5
    engine.dispose()
    own = make_engine(nowhere_url(silent_port, "connect_timeout=2"))
    assert own.dialect.create_connect_args(own.url)[1]["connect_timeout"] == "2"
    own.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0005_goes_down_to_an_outbox_without_retry_from_and_back_up(
    backend: str, tmp_path: Any
) -> None:
    """Operators' retries keep their window in outbox.retry_from (C8, C9); the migration that
    adds it also removes it again, on both backends (SQLite rebuilds the table to drop it)."""
    with ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / 'jobpost.db'}"
        else:
            url = stack.enter_context(scratch_postgres())
        engine = make_engine(url)
        stack.callback(engine.dispose)
        upgrade(engine)
        cfg = alembic_config(engine)
        for target, present in (("0004", False), ("head", True)):
            with engine.begin() as connection:
                cfg.attributes["connection"] = connection
                (command.downgrade if target == "0004" else command.upgrade)(cfg, target)
            columns = {c["name"] for c in inspect(engine).get_columns("outbox")}
            assert ("retry_from" in columns) is present
