"""A statement's plan, for the tests that check an index is read: right answers would not
show a lost index, PostgreSQL's EXPLAIN does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.orm import Session

T = TypeVar("T")


def explained(session: Session, run: Callable[[], T]) -> tuple[T, list[str]]:
    """What `run` returns, and the plan of the first statement it ran (PostgreSQL; none on
    SQLite)."""
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    connection = session.connection()
    event.listen(connection, "before_cursor_execute", keep)
    try:
        found = run()
    finally:
        event.remove(connection, "before_cursor_execute", keep)
    if connection.dialect.name != "postgresql":
        return found, []
    statement, params = seen[0]
    raw: Any = connection.connection.dbapi_connection
    return found, [r[0] for r in raw.execute("EXPLAIN " + statement, params).fetchall()]
