"""What every bench is given: where PostgreSQL is, how long to load, where results go."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from models.core.settings import Settings

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Options:
    admin_url: str  # a database on the server to connect to while creating the bench database
    database: str  # the scratch database the benches seed and share
    reseed: bool  # drop and seed again even when the database is already seeded
    duration: int  # seconds of measured load per scenario
    warmup: int  # seconds of unmeasured load before each scenario
    threads: int  # wrk threads
    connections: int  # wrk connections
    out_dir: Path  # results (JSON, wrk scripts, server log)
    deliveries: int  # applications the workers bench delivers, of each kind

    @classmethod
    def defaults(cls) -> Options:
        return cls(
            admin_url=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_ADMIN_URL),
            # Its own name lets several checkouts bench side by side on one server.
            database=os.environ.get("BENCH_DATABASE", "jobpost_bench"),
            reseed=False,
            duration=10,
            warmup=2,
            threads=2,
            connections=8,
            out_dir=Settings.from_env().var_dir / "bench",
            deliveries=2000,
        )
