"""The floor of a write (issue 15): PUT by referenceId's own statements, captured from the app
and replayed by a bare falcon handler on psycopg, under gunicorn with the API's worker count.

The replay has no ORM, no validation, no key check in Python and no middleware: it reads and
parses the body, runs the statements the app ran for a write in one transaction, commits and
answers the job. Its rate is what the write's SQL alone allows on this machine; no change to
the app's Python can take a write above it (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import falcon
import falcon.testing
import orjson
import psycopg
from sqlalchemy import event

from bench import seed, server
from tests.harness import free_port

STATEMENTS = "JOBPOST_BENCH_FLOOR"  # the captured writes' file, for the replay's workers
PATH = "/floor"


@dataclass(frozen=True)
class Write:
    """One write as the app made it: its statements with their values, and its answer."""

    statements: list[tuple[str, Any]]
    answer: bytes


def capture(url: str, key: str, bodies: list[str], path: str) -> list[Write]:
    """The writes the app (in this process, against `url`) makes of each of `bodies`, sent with
    PUT to `path`; those whose statements are not the usual number (a place read for the
    first time, a job left unchanged) are left out."""
    # Here, not at the top: the replay's gunicorn workers import this module and need none.
    from api.app import create_app
    from models.core.settings import Settings
    from models.db.engines import make_engine
    from models.db.unit_of_work import make_sessionmaker

    engine = make_engine(url)
    sent: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:  # conn, cursor, statement, parameters, context, many
        sent.append((args[2], args[3]))

    event.listen(engine, "before_cursor_execute", record)
    client = falcon.testing.TestClient(
        create_app(Settings.from_env({"DATABASE_URL": url}), make_sessionmaker(engine))
    )
    headers = {"API-Key": key, "Content-Type": "application/json"}
    writes = []
    try:
        for body in bodies:
            sent.clear()
            answer = client.simulate_put(path, body=body, headers=headers)
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"PUT {path} answered {answer.status_code}: {answer.text[:300]}")
            writes.append(Write(list(sent), answer.content))
    finally:
        engine.dispose()
    usual = Counter(len(w.statements) for w in writes).most_common(1)[0][0]
    return [w for w in writes if len(w.statements) == usual]


class Replay:
    """PUT: the next captured write, in one transaction on this process's own connection."""

    def __init__(self, url: str, writes: list[Write]) -> None:
        self.url, self.writes = url, writes
        self.connection: psycopg.Connection[Any] | None = None
        self.next = os.getpid() % len(writes)  # the workers start apart

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        orjson.loads(req.bounded_stream.read())  # a write's body is read and parsed
        if self.connection is None:
            self.connection = psycopg.connect(self.url)
        write = self.writes[self.next % len(self.writes)]
        self.next += 1
        with self.connection.cursor() as cursor:
            for sql, values in write.statements:
                cursor.execute(sql, values)
        self.connection.commit()
        resp.content_type, resp.data = falcon.MEDIA_JSON, write.answer


def served() -> falcon.App[Any, Any]:
    """gunicorn's app factory (`bench.floor:served()`), in each worker: the writes from the
    file STATEMENTS names."""
    with open(os.environ[STATEMENTS], "rb") as f:
        url, writes = pickle.load(f)
    app: falcon.App[Any, Any] = falcon.App()
    app.add_route(PATH, Replay(url, writes))
    return app


@contextmanager
def serving(url: str, writes: list[Write], workers: int, log_path: Path) -> Iterator[server.Server]:
    """The replay under gunicorn (sync workers, as `jobpost serve`) on a free port."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jobpost-bench-floor-") as folder:
        kept = Path(folder) / "writes.pickle"
        kept.write_bytes(pickle.dumps((seed.conninfo(url), writes)))
        command = [sys.executable, "-m", "gunicorn", "--workers", str(workers)]
        command += ["--bind", f"127.0.0.1:{port}", "bench.floor:served()"]
        environ = {**os.environ, STATEMENTS: str(kept)}
        with server.running(command, port, workers, log_path, environ, "the floor") as srv:
            yield srv
