"""The worker tests use the shared fixtures of tests/conftest.py (`smtp_sink`, `unused_port`),
and a redis-server of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from models.db.engines import make_engine
from models.db.unit_of_work import make_sessionmaker
from tests.conftest import copy_database
from tests.harness import RedisServer
from tests.services import private_redis


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server on a free port, for this test only: it may stop and restart it."""
    with private_redis(tmp_path) as server:
        yield server


@pytest.fixture
def copy(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[sessionmaker[Session]]:
    """Sessions on a copy of the migrated database, which `jobpost` opens by DATABASE_URL: the
    CLI's tests. No JOBPOST_SECRET_KEY, so the key file under the var folder is the key."""
    url = copy_database(engine, tmp_path / "jobpost.db")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("JOBPOST_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("JOBPOST_SECRET_KEY", raising=False)
    copy_engine = make_engine(url)
    yield make_sessionmaker(copy_engine)
    copy_engine.dispose()
