"""Liveness and readiness (C9): /healthz touches nothing; /readyz asks the database and
the broker, each within READY_TIMEOUT_SECONDS."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import falcon
from sqlalchemy import Engine, text

from api.errors import Problem
from api.responses import send_json

Check = Callable[[], object]
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readyz")


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send_json(resp, {"status": "ok"})


def database_check(engine: Engine) -> Check:
    def check() -> None:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    return check


class Ready:
    def __init__(self, checks: dict[str, Check], timeout: float) -> None:
        self.checks, self.timeout = checks, timeout

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        futures = {name: _pool.submit(check) for name, check in self.checks.items()}
        failed = []
        for name, future in futures.items():
            try:
                future.result(timeout=self.timeout)
            except FutureTimeout:
                failed.append(f"{name} (no answer within {self.timeout:g} s)")
            except Exception as e:
                failed.append(f"{name} ({type(e).__name__})")
        if failed:
            raise Problem(503, "not_ready", "Not ready: " + ", ".join(failed) + ".")
        send_json(resp, {"status": "ok"})  # the Status schema of openapi.json: nothing more
