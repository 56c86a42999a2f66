"""The stacks of the end-to-end worker tests (C8, C11, C12, C13): a real `celery worker` process,
a real broker (a private redis-server, or the embedded SQLAlchemy transport on SQLite), a
committed database (SQLite or PostgreSQL, copied for each test from a template migrated once)
and the test process's own Celery app; data written through the domain functions, and a real
SMTP server (aiosmtpd) to receive the copies. The test modules import the fixtures (`stack`,
its templates, `sink`) under their own names.

C9's timings are shortened (OUTBOX_SWEEP_GRACE_SECONDS=1, OUTBOX_LEASE_SECONDS=3,
DELIVERY_RETRY_BASE_SECONDS=1) so that leases run out and retries come due in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import re
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.applications import service as applications
from models.core.dates import today_in
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Application, OutboxEntry
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import writes as jobs
from tests.factories import job_body
from tests.harness import RedisServer
from tests.services import private_redis, require_postgres, scratch_postgres
from tests.workers.processes import SinkServer, SlowSink, Worker, worker_env
from workers import enqueue
from workers.app import make_celery
from workers.mail import content
from workers.tasks import run_sweep

MAIL_DOMAIN = "jobs.test"  # of MAIL_FROM in worker_env
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\n%%EOF\n"

REDIS_SQLITE = pytest.param("redis-sqlite", marks=pytest.mark.redis, id="redis-sqlite")
REDIS_POSTGRES = pytest.param(
    "redis-postgresql", marks=[pytest.mark.redis, pytest.mark.postgres], id="redis-postgresql"
)
EMBEDDED_SQLITE = pytest.param("embedded-sqlite", id="embedded-sqlite")
EVERY_STACK = [REDIS_SQLITE, REDIS_POSTGRES, EMBEDDED_SQLITE]
MAIN_STACKS = [REDIS_POSTGRES, EMBEDDED_SQLITE]


# --- databases: migrated once per run, then copied for each test --------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file (a migration takes seconds; a copy, milliseconds)."""
    path = tmp_path_factory.mktemp("template-sqlite") / "jobpost.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated PostgreSQL database (scratch_postgres + upgrade), the template of each
    test's own database; nothing connects to it after the upgrade."""
    with scratch_postgres() as url:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


def copy_sqlite(template: Path, target: Path) -> str:
    source, copy = sqlite3.connect(template), sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return f"sqlite:///{target}"


@dataclasses.dataclass
class PostgresCopy:
    admin: Engine
    name: str

    def drop(self) -> None:
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self.admin.dispose()


def copy_postgres(template_url: str) -> tuple[str, PostgresCopy]:
    admin = create_engine(require_postgres(), isolation_level="AUTOCOMMIT")
    template = make_url(template_url).database
    name = f"jobpost_worker_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    url = make_url(template_url).set(database=name).render_as_string(hide_password=False)
    return url, PostgresCopy(admin, name)


# --- the stack: database, broker, workers, and the test process's own Celery app ------------


@dataclasses.dataclass
class Stack:
    kind: str
    workdir: Path
    database_url: str
    broker_url: str
    redis: RedisServer | None
    engine: Engine
    sessions: sessionmaker[Session]
    settings: Settings  # what the workers read from their environment, minus SMTP
    celery: Celery  # the test process's app, on the same broker
    workers: list[Worker] = dataclasses.field(default_factory=list)

    def start_worker(
        self,
        smtp_port: int,
        *,
        concurrency: int = 1,
        time_limits: tuple[float, float] | None = None,
        pool: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> Worker:
        n = len(self.workers) + 1
        env = worker_env(
            database_url=self.database_url,
            broker_url=self.broker_url,
            smtp_port=smtp_port,
            workdir=self.workdir,
            extra=extra,
        )
        name = f"w{n}-{secrets.token_hex(3)}"
        log = self.workdir / f"worker-{n}.log"
        worker = Worker(
            env, log, name=name, concurrency=concurrency, time_limits=time_limits, pool=pool
        )
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    def sweep(self) -> int:
        """The beat's sweep task, run here against the test's broker."""
        return run_sweep(self.sessions, self.settings, celery=self.celery)

    def enqueue(self, application_id: int) -> None:
        assert enqueue.deliver(self.celery, application_id), "the broker refused the task"


@pytest.fixture
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    kind: str = request.param
    broker_kind, db_kind = kind.split("-")
    cleanups: list[Callable[[], object]] = []
    try:
        if db_kind == "sqlite":
            database_url = copy_sqlite(
                request.getfixturevalue("sqlite_template"), tmp_path / "jobpost.db"
            )
        else:
            database_url, copy = copy_postgres(request.getfixturevalue("postgres_template"))
            cleanups.append(copy.drop)
        redis = None
        if broker_kind == "redis":
            redis = private_redis(tmp_path)
            cleanups.append(redis.stop)
            redis.start()
            broker_url = redis.url
        else:
            broker_url = f"sqla+sqlite:///{tmp_path}/broker.sqlite"
        env = worker_env(
            database_url=database_url, broker_url=broker_url, smtp_port=1, workdir=tmp_path
        )
        settings = Settings.from_env(env)
        engine = make_engine(_as_tests(settings.database_url))
        cleanups.append(engine.dispose)
        celery = make_celery(settings)
        cleanups.append(celery.close)
        s = Stack(
            kind,
            tmp_path,
            database_url,
            broker_url,
            redis,
            engine,
            make_sessionmaker(engine),
            settings,
            celery,
        )
        cleanups.append(lambda: _stop_workers(s))
        yield s
    finally:
        for cleanup in reversed(cleanups):
            cleanup()


def _stop_workers(s: Stack) -> None:
    """Stop every worker; their logs go to the captured output, shown when a test fails."""
    for worker in s.workers:
        # The test is over: a warm shutdown (slow on the polled embedded broker) need not end.
        worker.stop(timeout=2)
        tail = worker.text()[-30_000:]
        print(f"\n===== {worker.log.name} ({worker.name}, exit {worker.proc.returncode}) =====")
        print(tail)


# --- data, through the domain functions ------------------------------------------------------


def open_job(s: Stack, language: str = "en", **overrides: Any) -> int:
    """An active job routed by email, of an employer reading `language`, committed."""
    with session_scope(s.sessions) as session:
        employer = employers.create_employer(session, "Maple Corp", language=language)
        body = job_body(status="active", **overrides)
        job = jobs.create(session, employer, body, today=today_in(s.settings.timezone))
        return job.id


def apply(s: Stack, job_id: int, count: int = 1, *, resume: bool = False) -> list[int]:
    """`count` applications, committed with their outbox entries (C8), not yet enqueued."""
    ids = []
    with session_scope(s.sessions) as session:
        job = applications.open_job(session, job_id)
        for i in range(count):
            fields: dict[str, Any] = {"name": f"Applicant {i}", "email": f"a{i}@example.org"}
            if resume:
                fields["resume"] = {
                    "filename": "Élodie CV.pdf",
                    "content": base64.b64encode(PDF).decode(),
                }
            ids.append(applications.submit(session, job, applications.check(fields)).id)
    return ids


def apply_with_resumes(s: Stack, job_id: int, resumes: list[bytes | None]) -> list[int]:
    """One application per item, each with that résumé (or none), committed."""
    ids = []
    with session_scope(s.sessions) as session:
        job = applications.open_job(session, job_id)
        for i, data in enumerate(resumes):
            fields: dict[str, Any] = {"name": f"Applicant {i}", "email": f"a{i}@example.org"}
            if data is not None:
                content = base64.b64encode(data).decode()
                fields["resume"] = {"filename": f"cv-{i}.pdf", "content": content}
            ids.append(applications.submit(session, job, applications.check(fields)).id)
    return ids


@dataclasses.dataclass(frozen=True)
class Entry:
    status: str
    attempts: int
    last_error: str | None
    job_id: int | None


def entries(s: Stack, ids: list[int]) -> dict[int, Entry]:
    with session_scope(s.sessions) as session:
        rows = session.execute(
            select(OutboxEntry, Application.job_id)
            .join(Application)
            .where(OutboxEntry.application_id.in_(ids))
        )
        return {
            o.application_id: Entry(o.status, o.attempts, o.last_error, job_id)
            for o, job_id in rows
        }


def entry(s: Stack, application_id: int) -> Entry:
    return entries(s, [application_id])[application_id]


def all_in(s: Stack, ids: list[int], *statuses: str) -> bool:
    found = entries(s, ids)
    return len(found) == len(ids) and all(e.status in statuses for e in found.values())


def message_id(application_id: int) -> str:
    return content.message_id(application_id, MAIL_DOMAIN)


def task_results(worker: Worker) -> list[str]:
    """The return values of jobpost.deliver, as the worker logged them."""
    return [result for _, result in task_runs(worker)]


def task_runs(worker: Worker) -> list[tuple[float, str]]:
    """How long each jobpost.deliver ran, in seconds, and what it returned."""
    pattern = r"Task jobpost\.deliver\[[^\]]+\] succeeded in ([0-9.e-]+)s: '(\w+)'"
    return [(float(took), result) for took, result in re.findall(pattern, worker.text())]


@pytest.fixture
def sink() -> Iterator[SinkServer]:
    server = SinkServer()
    try:
        yield server
    finally:
        server.stop()


class MidSend(SlowSink):
    """A sink that, holding each message's DATA, looks at the database from outside."""

    def __init__(self, host: str, port: int, look: Callable[[], object]) -> None:
        super().__init__(host, port)
        self.look = look
        self.seen: list[object] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        try:
            self.seen.append(await asyncio.to_thread(self.look))
        except Exception as e:  # a lock held by the sender, say: shown by the assertion
            self.seen.append(repr(e))
        return await super().handle_DATA(server, session, envelope)


TESTS_APPLICATION = "jobpost-tests"  # PostgreSQL's application_name of this process's pool


def _as_tests(database_url: str) -> str:
    """The URL for this process's own connections: on PostgreSQL they name themselves, so a
    look at the server's open transactions can leave out this process's own polling."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return database_url
    tagged = url.update_query_dict({"application_name": TESTS_APPLICATION})
    return tagged.render_as_string(hide_password=False)
