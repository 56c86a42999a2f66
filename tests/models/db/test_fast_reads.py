"""The fast read path: precompiled statements answer as SQLAlchemy does and leave their
connection fit, and the job list is planned for its employer's own values."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest
from sqlalchemy import (
    Engine,
    Integer,
    Select,
    bindparam,
    insert,
    literal,
    literal_column,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from models import employers
from models.db import fast_reads
from models.db.engines import autocommit, make_engine
from models.db.entities import Employer
from models.db.fast_reads import Precompiled
from models.jobs import listing as job_listing
from tests.models.conftest import backend_pid, terminate

NOW = datetime(2026, 11, 22, 9, 30, 15, 123456, tzinfo=UTC)


def _prepared(session: Session, fragment: str) -> int:
    query = text("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE :f")
    return int(session.execute(query, {"f": f"%{fragment}%"}).scalar_one())


def test_a_search_reading_every_match_is_planned_for_its_employer_every_time(
    engine: Engine,
) -> None:
    """C6 on a skewed table: a search's statement reading every match is never prepared (a
    prepared plan may be one made for an average employer), while a first page, which walks
    the employer's index whoever the employer is, is prepared, so PostgreSQL may keep its
    plan rather than plan it for each request, as the other statements are."""
    if engine.dialect.name != "postgresql":
        assert engine.dialect.name == "sqlite"  # SQLite plans every statement afresh anyway
        return
    with Session(engine) as session:
        employer = employers.create_employer(session, "Maple Corp")
        for _ in range(8):  # psycopg prepares a statement on its 5th run
            for q in ("baker", None):
                job_listing.listing(
                    session.connection(), employer.id, q=q, status=None, page=1, page_size=10
                )
            session.execute(select(Employer.name).where(Employer.id == employer.id)).scalar_one()
        assert _prepared(session, "OVER ()") == 0
        assert _prepared(session, "LIMIT 10 OFFSET 0") == 1
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
        kept = conn.connection.info[fast_reads.KEPT_CURSOR]
        assert ratio.first(conn, {"d": 1}) == (1,)
        assert conn.connection.info[fast_reads.KEPT_CURSOR] is kept
        with pytest.raises(DBAPIError, match="division by zero") as raised:
            ratio.first(conn, {"d": 0})
        assert not raised.value.connection_invalidated
        assert fast_reads.KEPT_CURSOR not in conn.connection.info and kept.closed
        assert ratio.first(conn, {"d": 1}) == (1,)
        assert conn.connection.info[fast_reads.KEPT_CURSOR] is not kept
    reads.dispose()


def test_a_connection_lost_under_a_precompiled_statement_is_replaced(postgres_url: str) -> None:
    """As for any statement: the error is SQLAlchemy's, flagged a disconnect, and the pool
    connects afresh instead of handing the dead connection out again."""
    engine = make_engine(postgres_url, idle_ping_seconds=3600, pool_size=1)
    with engine.connect() as conn:  # lost while in use: the checkout's check is behind it
        first = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        terminate(postgres_url, first)
        with pytest.raises(DBAPIError) as raised:
            Precompiled(select(literal(1, literal_execute=True))).first(conn, {})
    assert raised.value.connection_invalidated
    assert backend_pid(engine) != first
    engine.dispose()
