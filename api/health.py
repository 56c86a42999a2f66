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


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send_json(resp, {"status": "ok"})


def database_check(engine: Engine) -> Check:
    def check() -> None:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    return check


class Ready:
    """Each check runs in threads of its own: a silent database holds its check's thread until
    the driver gives up (10 s), and probes every second would otherwise fill a shared pool
    and queue the broker's check behind it, naming a broker that answers. A check that has
    not started when its time is up is cancelled, so a silent source does not pile up checks."""

    def __init__(self, checks: dict[str, Check], timeout: float) -> None:
        self.checks, self.timeout = checks, timeout
        self.pools = {
            name: ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"readyz-{name}")
            for name in checks
        }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        futures = {name: self.pools[name].submit(check) for name, check in self.checks.items()}
        failed = []
        for name, future in futures.items():
            try:
                future.result(timeout=self.timeout)
            except FutureTimeout:
                future.cancel()
                failed.append(f"{name} (no answer within {self.timeout:g} s)")
            except Exception as e:
                failed.append(f"{name} ({type(e).__name__})")
        if failed:
            raise Problem(503, "not_ready", "Not ready: " + ", ".join(failed) + ".")
        send_json(resp, {"status": "ok"})  # the Status schema of openapi.json: nothing more
