"""The fast read path: statements compiled once and run on the driver's cursor
(`Precompiled`), and statements sent unprepared so that each is planned for its own values
(`planned_for_values`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Dialect, Select
from sqlalchemy.exc import DBAPIError

KEPT_CURSOR = "jobpost.kept_cursor"  # in a pooled connection's info, by `Precompiled`


class Precompiled:
    """A Core SELECT compiled once per dialect and run on the DBAPI cursor, for the
    statements that every request or every list runs (authentication, the job list, a job's
    read and, through WITH queries, its writes): SQLAlchemy's work
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
    are all in memory, so nothing stays open on the server between uses (it outlives no
    transaction there: a transaction pooler may give the next one another server
    connection). SQLite gets a cursor per statement: one left part-read would keep its read
    transaction open. The pool clears `info` when it replaces the connection."""
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
        # Values the statement holds itself (a literal compared with, a value set).
        self.fixed = {
            name: bind.effective_value for name, bind in compiled.binds.items() if not bind.required
        }
        self.dialect = dialect
        self.types = [column.type.dialect_impl(dialect) for column in statement.selected_columns]
        # The columns to convert and how: from the first answer's column types.
        self.results: list[tuple[int, Any]] | None = None

    def read(self, cursor: Any, rows: list[Any]) -> list[tuple[Any, ...]]:
        """Rows as SQLAlchemy would give them (some conversions depend on the type the
        database reports for a column, so they are settled on the first answer)."""
        if self.results is None:
            processors = [
                kind.result_processor(self.dialect, column[1])
                for kind, column in zip(self.types, cursor.description, strict=True)
            ]
            self.results = [(i, p) for i, p in enumerate(processors) if p is not None]
        if not self.results:  # most columns come from the driver as they are wanted
            return [tuple(row) for row in rows]
        return [self.convert(row) for row in rows]

    def values(self, params: dict[str, Any]) -> Any:
        params = {**self.fixed, **params} if self.fixed else params
        params = {k: (p(v) if (p := self.binds.get(k)) else v) for k, v in params.items()}
        return params if self.order is None else tuple(params[k] for k in self.order)

    def convert(self, row: Any) -> tuple[Any, ...]:
        assert self.results is not None
        values = list(row)
        for i, process in self.results:
            values[i] = process(values[i])
        return tuple(values)


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
