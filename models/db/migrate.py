"""`jobpost db upgrade`: Alembic migrations to head, then reference data; idempotent (C9)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from models.db.unit_of_work import make_sessionmaker, session_scope
from models.reference import lists as reference

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine) -> None:
    """Bring the schema to head and load the reference lists and the gazetteer."""
    cfg = alembic_config(engine)
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")
    with session_scope(make_sessionmaker(engine)) as session:
        reference.load(session)
