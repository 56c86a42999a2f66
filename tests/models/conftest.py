"""PostgreSQL connections for the tests of the engines and the fast read path: a scratch
database, a backend's pid, and the server ending a connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.services import scratch_postgres


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with scratch_postgres() as url:
        yield url


def backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        pid: int = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        return pid


def terminate(url: str, pid: int) -> None:
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
