"""The worker tests use the shared fixtures of tests/conftest.py (`smtp_sink`, `unused_port`),
and a redis-server of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import RedisServer
from tests.services import private_redis


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server on a free port, for this test only: it may stop and restart it."""
    with private_redis(tmp_path) as server:
        yield server
