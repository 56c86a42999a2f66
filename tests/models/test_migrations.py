"""The migrations against the entities (C9): upgraded, they make the schema models.entities
declares, on both backends."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine

from models.entities import Base

# Migration 0003's GIN index on jobpost_search_grams(...): PostgreSQL only, and an expression
# index, which the entities cannot declare for both backends nor Alembic compare.
MIGRATION_ONLY = {"ix_jobs_search_grams"}


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
