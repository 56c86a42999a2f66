"""The migrations against the entities (C9): upgraded, they make the schema models.db.entities
declares; each one's downgrade gives back the schema its predecessor made; on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from models.alerts import filters as alert_filters
from models.db.engines import make_engine
from models.db.entities import Base
from models.db.migrate import alembic_config, upgrade
from tests.factories import EVERY_FILTER, EVERY_FILTER_QUERY
from tests.services import scratch_postgres

# The GIN indexes on jobpost_search_grams(...) of migrations 0003 and 0026: PostgreSQL only,
# and expression indexes, which the entities cannot declare for both backends nor Alembic
# compare.
MIGRATION_ONLY = {"ix_jobs_search_grams", "ix_jobs_open_grams"}


def _declared(name: str | None, type_: str, _parents: Any) -> bool:
    return not (type_ == "index" and name in MIGRATION_ONLY)


def test_the_migrations_make_the_schema_the_entities_declare(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": _declared,
            },
        )
        assert compare_metadata(context, Base.metadata) == []


@pytest.fixture(params=["sqlite", "postgresql"])
def empty(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A database of the test's own, with no schema yet."""
    with ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / 'jobpost.db'}"
        else:
            url = stack.enter_context(scratch_postgres())
        engine = make_engine(url)
        stack.callback(engine.dispose)
        yield engine


def _schema(connection: Connection) -> list[Any]:
    """The schema as the database itself states it (SQLite's AUTOINCREMENT and DESC index
    columns included), without quoting or layout, which a rebuilt table changes."""
    if connection.dialect.name == "sqlite":
        rows = connection.execute(
            text("SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1")
        )
        return [(name, " ".join((sql or "").replace('"', "").split())) for name, sql in rows]
    queries = [
        "SELECT table_name, column_name, data_type, character_maximum_length, numeric_precision,"
        " numeric_scale, is_nullable, column_default, collation_name"
        " FROM information_schema.columns WHERE table_schema = 'public'"
        " ORDER BY table_name, ordinal_position",
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE connamespace = 'public'::regnamespace ORDER BY 1",
        # jobpost's own functions; not the extensions' (0001 creates pg_trgm and btree_gin if
        # not there, and leaves them, which others may use, when it goes down)
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p"
        " WHERE pronamespace = 'public'::regnamespace AND NOT EXISTS (SELECT FROM pg_depend d"
        " WHERE d.objid = p.oid AND d.deptype = 'e') ORDER BY 1",
    ]
    return [list(connection.execute(text(query))) for query in queries]


def test_each_migration_goes_down_to_the_schema_before_it(empty: Engine) -> None:
    cfg = alembic_config(empty)

    def migrate(step: Any, target: str) -> list[Any]:
        with empty.begin() as connection:
            cfg.attributes["connection"] = connection
            step(cfg, target)
            return _schema(connection)

    steps = [
        "base",
        *reversed([s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()]),
    ]
    made = {revision: migrate(command.upgrade, revision) for revision in steps}
    for before, revision in reversed(list(pairwise(steps))):
        assert migrate(command.downgrade, before) == made[before], f"downgrade of {revision}"
    upgrade(empty)  # and up again, reference data too
    with empty.connect() as connection:
        assert _schema(connection) == made[steps[-1]]


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


def test_0017_compresses_long_texts_with_lz4_on_postgresql_and_down_with_pglz() -> None:
    """What the server stores a description, its translation and a sync item's body with:
    'l' (LZ4) after 0017, 'p' (pglz) after its downgrade."""

    def methods(engine: Engine) -> dict[str, str]:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT attrelid::regclass || '.' || attname, attcompression FROM pg_attribute"
                    " WHERE (attrelid, attname) IN (('jobs'::regclass, 'description'),"
                    " ('jobs'::regclass, 'translation_description'),"
                    " ('sync_items'::regclass, 'body'))"
                )
            )
            return {str(name): str(method) for name, method in rows}

    with scratch_postgres() as url:
        engine = make_engine(url)
        try:
            upgrade(engine)
            every = ("jobs.description", "jobs.translation_description", "sync_items.body")
            assert methods(engine) == dict.fromkeys(every, "l")
            cfg = alembic_config(engine)
            with engine.begin() as connection:
                cfg.attributes["connection"] = connection
                command.downgrade(cfg, "0016")
            assert methods(engine) == dict.fromkeys(every, "p")
        finally:
            engine.dispose()


# Alerts' searches as stored before 0024 (the dataclass's field names, sorted), and after.
STORED_SEARCHES = {
    "": "",
    "category=12&province=QC&q=line+cook": "q=line+cook&category=12&province=QC",
    "category=12&days=7&min_pay=50000&place=6167865&position_type=1&province=ON&q=caf%C3%A9"
    "&workplace_type=remote": EVERY_FILTER_QUERY,
}
INSERT_ALERT = text(
    "INSERT INTO alert_subscriptions (id, email, language, frequency, filters, state,"
    " created_at) VALUES (:id, :email, 'en', 'daily', :filters, 'confirmed', :at)"
)


def test_0024_rewrites_each_alerts_search_in_the_search_pages_form_and_back(
    empty: Engine,
) -> None:
    """C19: one stored form, what `Filters.to_query` writes; the downgrade gives the old back."""
    cfg = alembic_config(empty)
    before = ScriptDirectory.from_config(cfg).get_revision("0024").down_revision
    assert isinstance(before, str)

    def migrate(step: Any, target: str) -> list[str]:
        with empty.begin() as connection:
            cfg.attributes["connection"] = connection
            step(cfg, target)
            rows = connection.execute(text("SELECT filters FROM alert_subscriptions ORDER BY id"))
            return [str(f) for (f,) in rows]

    migrate(command.upgrade, before)
    with empty.begin() as connection:
        for n, old in enumerate(STORED_SEARCHES, start=1):
            at = datetime(2026, 12, 1)
            values = {"id": n, "email": f"a{n}@example.com", "filters": old, "at": at}
            connection.execute(INSERT_ALERT, values)
    written = migrate(command.upgrade, "0024")
    assert written == list(STORED_SEARCHES.values())
    searches = [alert_filters.from_query(t) for t in written]
    assert [alert_filters.to_query(f) for f in searches] == written  # what the code writes
    assert searches[2] == EVERY_FILTER
    assert migrate(command.downgrade, before) == list(STORED_SEARCHES)
