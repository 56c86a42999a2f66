"""Real PostgreSQL and Redis for the tests: found, or skipped, or (under CI=true) a failure."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.harness import RedisServer

CI = os.environ.get("CI", "").lower() == "true"
POSTGRES_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def missing(what: str) -> NoReturn:
    """A service a test truly needs is absent: skip, except under CI where it is a failure."""
    if CI:
        pytest.fail(f"{what} is not available, and CI=true requires it", pytrace=False)
    pytest.skip(f"{what} is not available")


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_postgres() -> str:
    url = make_url(POSTGRES_URL)
    if not _answers(url.host or "127.0.0.1", url.port or 5432):
        missing(f"PostgreSQL at {url.host}:{url.port}")
    return POSTGRES_URL


def require_redis() -> str:
    url = make_url(REDIS_URL.replace("redis://", "redis+x://", 1))
    if not _answers(url.host or "127.0.0.1", url.port or 6379):
        missing(f"Redis at {url.host}:{url.port}")
    return REDIS_URL


def private_redis(workdir: Path) -> RedisServer:
    """A redis-server of the test's own (not started yet), which it may stop and restart."""
    try:
        return RedisServer(workdir)
    except FileNotFoundError:
        missing("the program redis-server")


@contextmanager
def scratch_postgres() -> Iterator[str]:
    """A PostgreSQL database of this test run's own, dropped afterwards."""
    admin_url = require_postgres()
    name = f"jobpost_test_{os.getpid()}_{secrets.token_hex(4)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
