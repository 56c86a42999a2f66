"""The workers bench (issue #3): applications accepted by the API, and copies delivered by one
Celery worker process to a local SMTP sink, each beside a baseline of the same run.

Everything runs on private services started for the run and stopped after it: a redis-server
on a free port (the broker, persisting nothing), a PostgreSQL database of the bench's own
(`jobpost_bench_workers`, created and migrated afresh, so the seeded million of the other
benches is never touched) and an SMTP sink (`bench/smtp_sink.py`) in a process of its own:
aiosmtpd is pure Python, so a sink inside the bench process would take CPU from the sender
being measured, and its cost is shown in a column of its own instead.

1. Acceptance: `jobpost serve` (gunicorn, one sync worker per core; broker and SMTP as above,
   APPLY_RATE_LIMIT=off) under wrk, POSTing JSON applications to one active Email job: a
   ~500-character cover letter and no résumé, then the same with a 50 KB PDF résumé. Accepted
   applications per second (202s), beside GET /healthz of the same server (first and last,
   their mean is the baseline). No target: the ratio says what taking an application costs.
2. Delivery: N applications of each kind (the same fields as the POSTs, stored by
   `models.applications.service.submit`) are delivered by ONE worker process (`jobpost worker
   --concurrency 1`), up and warm (50 copies delivered first). It stops consuming the email
   queue while the N tasks are enqueued and starts again when the clock starts: copies/s is
   N over the time from then to the last `sent_at`, worker start and enqueueing left out.
   The baseline is a plain loop in the bench process sending the same messages to the same
   sink with smtplib over one connection kept across them, as the worker keeps its
   (`workers.mail.relay.Relay`; the worker also sends RSET before each reuse), so the ratio is
   what the pipeline costs beside sending, not what reusing connections saves. A loop with
   a connection per message (connect, EHLO, MAIL, RCPT, DATA, QUIT), as the worker sent
   until it kept one, is shown beside it, with no target. The messages are built beforehand with
   `build_message` (tests/workers/mail_reference.py, the readable reference of the copy) from
   the same ApplicationCopy data the worker reads, so the loop times sending alone (send_message
   flattens each message); the worker renders its bytes itself (`workers.mail.mime.render`) and
   that is in its time. The reference's build time is shown apart, with what the baseline
   would be had the loop built them. The loop runs before and after the worker; their mean
   is the baseline. No target here since C12's delivery engine: these are the zero-latency
   figures of one copy at a time, kept beside the engine bench (bench/engine.py), whose
   relay answers DATA after 100 ms and whose worker overlaps 16 sends. A diagnostic row:
   `workers.delivery.deliver` called for the same N in the bench process (no Celery), so the
   table splits the worker's cost into sending, the task body and Celery. Another, no target:
   Celery's floor, the same worker running N tasks that do nothing (celery.accumulate), from
   which the report derives the most any one-task-per-copy worker could reach beside the loop.
   CPU time of every process involved (sender, sink, PostgreSQL backends, redis) is shown
   per message: unlike rates, it hardly moves when other processes load the machine.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import smtplib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import psycopg
import redis
from celery import Celery
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from bench import report, seed, server, smtp_sink, wrk
from bench.http import Client
from bench.options import Options
from models import employers
from models.applications import service as applications
from models.core.dates import today_in
from models.core.settings import VARIABLES, Settings
from models.db.engines import make_engine
from models.db.entities import Application, Resume
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import writes as jobs
from tests.harness import JOBPOST, Program, RedisServer, free_port
from tests.workers.mail_reference import build_message
from workers import broker, delivery, enqueue
from workers.app import EMAIL_QUEUE, make_celery
from workers.mail.content import ApplicationCopy

DATABASE = "jobpost_bench_workers"
API = "/api/v1.1"
HEALTHZ = "GET /healthz"
MAIL_FROM = "Jobpost <jobpost@jobs.test>"
BODIES = 20  # distinct applicants the POSTs cycle through
RESUME_BYTES = 50 * 1024
WARMUP_COPIES = 50  # delivered before any timing: the pool child imported, connected, warm
RANDOM_SEED = 20261122
COVER_LETTER = (
    "Dear hiring team,\n\n"
    "I am writing to apply for this position. Over the last six years I have worked in busy "
    "kitchens in Toronto and Montréal, most recently as a line cook on a 120-seat service, "
    "where I ran the grill station and trained three new cooks. I am reliable, calm under "
    "pressure and careful with food safety; I hold a current Food Handler certificate. I am "
    "available for evenings and weekends and can start within two weeks.\n\n"
    "Thank you for your time and consideration.\nKind regards"
)


@dataclass(frozen=True)
class Kind:
    """Applications of one shape: the résumé, or none."""

    name: str
    resume: bytes | None

    def fields(self, i: int) -> dict[str, Any]:
        """Applicant i's JSON fields, as POSTed and as given to `applications.check`."""
        body: dict[str, Any] = {
            "name": f"Applicant Number{i}",
            "email": f"applicant{i}@example.com",
            "phone": "+1 416 555 0100",
            "coverLetter": COVER_LETTER,
        }
        if self.resume is not None:
            content = base64.b64encode(self.resume).decode("ascii")
            body["resume"] = {"filename": f"resume-{i}.pdf", "content": content}
        return body


@dataclass(frozen=True)
class Accepted:
    """One wrk scenario against the API."""

    scenario: str
    first_status: int  # of one request sent before the load
    result: wrk.Result
    accepted: int  # 202 answers (for /healthz: 200 answers)
    per_second: float
    worker_cpu_ms: float  # gunicorn workers' CPU time per request


@dataclass(frozen=True)
class Sending:
    """One delivery of the same N messages, by the plain loop or by the worker."""

    scenario: str
    messages: int
    seconds: float
    per_second: float
    sender_cpu_ms: float  # per message: the bench process (loop) or the worker's processes
    sink_cpu_ms: float
    postgres_cpu_ms: float  # the backends of the bench database
    redis_cpu_ms: float
    sink_messages: int  # what the sink counted meanwhile (must equal `messages`)
    sink_bytes: int

    @property
    def all_cpu_ms(self) -> float:
        """Every process of the chain, per message: on an idle machine, where each message
        passes through them one after the other, about the wall time per message."""
        return self.sender_cpu_ms + self.sink_cpu_ms + self.postgres_cpu_ms + self.redis_cpu_ms


@dataclass(frozen=True)
class Delivery:
    kind: str
    count: int
    message_bytes: float  # mean size on the wire, as the sink counted it
    build_ms: float  # the tests' build_message per message, not in the plain loop's time
    enqueue_seconds: float  # sending N tasks to the broker (before the worker consumes them)
    plain: list[Sending]  # before and after the worker
    fresh: Sending  # no target: the loop with a connection per message
    worker: Sending
    in_process: Sending  # diagnostic: workers.delivery.deliver called in a loop, no Celery
    floor: Sending  # diagnostic: the same worker running tasks that do nothing
    baseline: float  # mean of the plain loops' messages/s
    ratio: float  # worker copies/s ÷ baseline

    @property
    def built_in_loop(self) -> float:
        """Messages/s the plain loop would send if it built each message too (derived)."""
        return 1 / (1 / self.baseline + self.build_ms / 1000) if self.baseline else 0.0

    @property
    def bound(self) -> float:
        """The ratio a worker would reach whose task cost Celery's floor and then sent as the
        plain loop sends, and did nothing else (derived): the most one task per copy allows."""
        if not (self.floor.per_second and self.baseline):
            return 0.0
        return (1 / (1 / self.floor.per_second + 1 / self.baseline)) / self.baseline

    @property
    def cpu_ratio(self) -> float:
        """The plain loops' CPU per message (all processes) ÷ the worker's: the ratio an idle
        machine would show, whatever else ran meanwhile."""
        plain = sum(p.all_cpu_ms for p in self.plain) / len(self.plain)
        return plain / self.worker.all_cpu_ms if self.worker.all_cpu_ms else 0.0


@dataclass
class Run:
    cores: int
    deliveries: int
    api: list[Accepted] = field(default_factory=list)
    api_stored: int = 0  # applications in the database after the load
    api_enqueued: int = 0  # messages waiting in the email queue after the load
    delivery: list[Delivery] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load_average: list[float] = field(default_factory=list)
    seconds: float = 0.0


def run(options: Options) -> bool:
    started = time.perf_counter()
    wrk_path = wrk.ensure_installed()
    out = options.out_dir
    result = Run(server.cores(), options.deliveries, load_average=[os.getloadavg()[0]])
    pdf = _pdf(RESUME_BYTES)
    kinds = [Kind("no résumé", None), Kind("50 KB PDF résumé", pdf)]
    print(f"bench database {DATABASE}: created and migrated afresh …", flush=True)
    url = _fresh_database(options.admin_url)
    engine = make_engine(url)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jobpost-bench-")))
        redis_log = out / "workers-redis.log"
        broker_server = stack.enter_context(RedisServer(workdir, redis_log))
        sink = stack.enter_context(smtp_sink.running(out / "workers-sink.log"))
        env = _service_env(url, broker_server.url, sink, workdir)
        sessions = make_sessionmaker(engine)
        job_id = _job(sessions)
        print(
            f"services: redis-server pid {broker_server.pid} ({broker_server.url}), SMTP sink "
            f"pid {sink.pid} (port {sink.port}), job {job_id}",
            flush=True,
        )
        try:
            _accept(options, wrk_path, url, env, job_id, kinds, result)
            result.api_stored, result.api_enqueued = _api_leftovers(engine, broker_server.url)
            _forget_api_applications(engine, url, broker_server.url)
            celery = make_celery(Settings.from_env(env))
            running = _Services(env, sink, broker_server, celery, Settings.from_env(env))
            _deliver(options, engine, sessions, running, job_id, kinds, result)
        finally:
            engine.dispose()
    result.load_average.append(os.getloadavg()[0])
    result.seconds = time.perf_counter() - started
    return _report(options, result)


# -- set-up ---------------------------------------------------------------------------------


def _fresh_database(admin_url: str, name: str = DATABASE) -> str:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return url


def _job(sessions: sessionmaker[Session]) -> int:
    """An employer and one active job routed by email: the job applicants apply to."""
    body = {
        "title": "Line Cook",
        "referenceId": "BENCH-1",
        "status": "active",
        "locations": [{"description": "Toronto, ON"}],
        "categories": [{"id": 12}],
        "positionType": {"id": 1},
        "description": "<p>Join our <strong>kitchen</strong>.</p>",
        "applicantRoutingType": {"id": 1},
        "applicationEmail": "hiring@jobs.test",
    }
    with session_scope(sessions) as s:
        employer = employers.create_employer(s, "Bench Bistro", "standard")
        job = jobs.create(s, employer, body, today=today_in(Settings.from_env().timezone))
        s.flush()
        return job.id


def _service_env(
    database_url: str, broker_url: str, sink: smtp_sink.Sink, workdir: Path
) -> dict[str, str]:
    # None of the caller's jobpost settings: the services see only what the bench gives them.
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    (workdir / "prometheus").mkdir(parents=True, exist_ok=True)
    env.update(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        APPLY_RATE_LIMIT="off",
        SMTP_HOST=sink.host,
        SMTP_PORT=str(sink.port),
        SMTP_TIMEOUT="30",
        MAIL_FROM=MAIL_FROM,
        PROMETHEUS_MULTIPROC_DIR=str(workdir / "prometheus"),
        WORKER_METRICS_PORT=str(free_port()),
        JOBPOST_VAR_DIR=str(workdir),
        PYTHONUNBUFFERED="1",
    )
    return env


def _pdf(size: int) -> bytes:
    """A PDF-shaped file of `size` bytes: header, one stream of incompressible bytes (as a
    real résumé's compressed content is), trailer."""
    head = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Length 0000000000 >>\nstream\n"
    tail = b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
    stream = random.Random(RANDOM_SEED).randbytes(size - len(head) - len(tail))
    head = head.replace(b"0000000000", f"{len(stream):010d}".encode())
    return head + stream + tail


# -- 1. acceptance ---------------------------------------------------------------------------


def _accept(
    options: Options,
    wrk_path: str,
    url: str,
    env: Mapping[str, str],
    job_id: int,
    kinds: Sequence[Kind],
    result: Run,
) -> None:
    path = f"{API}/jobs/{job_id}/applications"
    healthz = [wrk.Request("GET", "/healthz")]
    scenarios: list[tuple[str, list[wrk.Request], int]] = [(HEALTHZ, healthz, 200)]
    for kind in kinds:
        posts = [wrk.Request("POST", path, json.dumps(kind.fields(i))) for i in range(BODIES)]
        scenarios.append((f"POST application, {kind.name}", posts, 202))
    scenarios.append((f"{HEALTHZ} (again)", healthz, 200))
    log = options.out_dir / "workers-server.log"
    with server.gunicorn(url, result.cores, log, env=env) as srv:
        print(
            f"\nacceptance: wrk -t{options.threads} -c{options.connections}, {options.warmup} s "
            f"warm-up + {options.duration} s per scenario; gunicorn, {result.cores} sync workers",
            flush=True,
        )
        for name, requests, expect in scenarios:
            result.api.append(_measure(options, wrk_path, srv, name, requests, expect))


def _measure(
    options: Options,
    wrk_path: str,
    srv: server.Server,
    name: str,
    requests: list[wrk.Request],
    expect: int,
) -> Accepted:
    first = requests[0]
    answer = Client(srv.base_url).request(first.method, first.path, first.body, auth=False)
    if answer.status != expect:
        raise RuntimeError(f"{name}: answered {answer.status}, not {expect}: {answer.body[:500]!r}")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    script = options.out_dir / "wrk" / f"workers-{slug}.lua"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(wrk.script(requests, {}))
    threads = min(options.threads, options.connections)

    def load(seconds: int) -> wrk.Result:
        return wrk.run(
            wrk_path,
            srv.base_url,
            script,
            threads=threads,
            connections=options.connections,
            seconds=seconds,
        )

    if options.warmup:
        load(options.warmup)
    cpu = srv.cpu_seconds()
    result = load(options.duration)
    cpu_ms = (srv.cpu_seconds() - cpu) * 1000 / max(result.requests, 1)
    accepted = result.statuses.get(expect, 0)
    per_second = accepted / result.seconds if result.seconds else 0.0
    others = {s: n for s, n in result.statuses.items() if s != expect}
    errors = sum(result.socket_errors.values())
    print(
        f"  {name:<40} {per_second:7,.0f} /s  p50 {result.p50_ms:7.2f} ms  "
        f"p99 {result.p99_ms:7.2f} ms  {cpu_ms:5.2f} CPU ms/req  {accepted:,} × {expect}"
        + "".join(f", {n:,} × {s}" for s, n in sorted(others.items()))
        + (f", {errors:,} socket errors" if errors else ""),
        flush=True,
    )
    return Accepted(name, answer.status, result, accepted, per_second, cpu_ms)


# Each application enqueues its copy (C8) and its applicant's receipt (C20).
TASKS_PER_APPLICATION = 2


def _api_leftovers(engine: Engine, broker_url: str) -> tuple[int, int]:
    """Applications the API stored, and tasks it enqueued (no worker ran meanwhile)."""
    with engine.connect() as conn:
        stored = int(conn.scalar(text("SELECT count(*) FROM applications")) or 0)
    return stored, broker.depths(broker_url).get(EMAIL_QUEUE, 0)


def _forget_api_applications(engine: Engine, url: str, broker_url: str) -> None:
    """The delivery part starts from an empty queue and outbox: the API's applications go."""
    redis.Redis.from_url(broker_url).flushdb()  # the bench's private server
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM receipts"))  # C20: the applicants' receipts
        conn.execute(text("DELETE FROM applications"))  # résumés and outbox entries cascade
    conninfo = seed.conninfo(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for table in ("applications", "outbox", "resumes", "receipts"):
            conn.execute(f"VACUUM (ANALYZE) {table}")


# -- 2. delivery -----------------------------------------------------------------------------


@contextmanager
def worker(
    env: Mapping[str, str], concurrency: int, log: Path, ready: Callable[[], bool]
) -> Iterator[int]:
    """`jobpost worker --concurrency N` until `ready()` holds; yields the main process's pid.
    Stopped with a warm shutdown (SIGTERM), its group killed after."""
    command = [*JOBPOST, "worker", "--concurrency", str(concurrency)]
    with Program(command, log, env=env, name="the worker", stop_timeout=20) as proc:
        what = f"the worker to answer (log: {log})"
        proc.wait_until(ready, timeout=server.START_TIMEOUT, what=what)
        yield proc.pid


@dataclass(frozen=True)
class _Services:
    env: Mapping[str, str]  # of the server and the worker
    sink: smtp_sink.Sink
    redis: RedisServer
    celery: Celery  # the bench's client of the private broker
    settings: Settings  # the worker's, for the in-process diagnostic


def _deliver(
    options: Options,
    engine: Engine,
    sessions: sessionmaker[Session],
    running: _Services,
    job_id: int,
    kinds: Sequence[Kind],
    result: Run,
) -> None:
    celery, sink = running.celery, running.sink

    def ready() -> bool:
        return bool(celery.control.ping(timeout=0.5))

    log = options.out_dir / "workers-worker.log"
    conninfo = seed.conninfo(engine.url)
    with (
        worker(running.env, 1, log, ready) as worker_pid,
        psycopg.connect(conninfo, autocommit=True) as watch,
    ):
        probe = _Probe(watch, worker_pid, sink, running.redis.pid)
        print(f"\ndelivery: one worker process (pid {worker_pid}, --concurrency 1)", flush=True)
        warm = _submit(sessions, job_id, [kinds[0].fields(i) for i in range(WARMUP_COPIES)])
        _enqueue(celery, warm)
        _wait_sent(watch, warm, timeout=120)
        for kind in kinds:
            result.delivery.append(
                _deliver_kind(options.deliveries, sessions, running, probe, job_id, kind)
            )


def _deliver_kind(
    count: int,
    sessions: sessionmaker[Session],
    running: _Services,
    probe: _Probe,
    job_id: int,
    kind: Kind,
) -> Delivery:
    """Plain loop, worker, deliver() in the bench process, plain loop again: the same N."""
    sink = running.sink
    ids = _submit(sessions, job_id, [kind.fields(i) for i in range(count)])
    copies = _copies(sessions, ids)
    started = time.perf_counter()
    messages = [build_message(c, mail_from=MAIL_FROM) for c in copies]
    build_ms = (time.perf_counter() - started) * 1000 / len(messages)
    first = _plain_loop(f"plain smtplib loop, {kind.name}", messages, sink, probe)
    worker, enqueue_seconds = _worker_delivery(f"worker, {kind.name}", ids, running.celery, probe)
    _pending_again(probe.watch, ids)
    in_process = _deliver_loop(
        f"deliver() in-process, {kind.name}", ids, sessions, running.settings, probe
    )
    floor = _celery_floor(f"Celery's floor, {kind.name}", count, running, probe)
    again = _plain_loop(f"plain smtplib loop, {kind.name} (again)", messages, sink, probe)
    fresh = _plain_loop(f"loop, a connection each, {kind.name}", messages, sink, probe, kept=False)
    baseline = (first.per_second + again.per_second) / 2
    return Delivery(
        kind=kind.name,
        count=count,
        message_bytes=worker.sink_bytes / max(worker.sink_messages, 1),
        build_ms=build_ms,
        enqueue_seconds=enqueue_seconds,
        plain=[first, again],
        fresh=fresh,
        worker=worker,
        in_process=in_process,
        floor=floor,
        baseline=baseline,
        ratio=worker.per_second / baseline if baseline else 0.0,
    )


SUBMITTED = 100  # applications a transaction of `_submit` stores


def _submit(
    sessions: sessionmaker[Session], job_id: int, fields: Sequence[dict[str, Any]]
) -> list[int]:
    """Store applications as the API does (checked, then submitted), SUBMITTED at a time: a
    transaction of thousands would outlast the change feed's bound on a commit (C10)."""
    ids: list[int] = []
    for start in range(0, len(fields), SUBMITTED):
        with session_scope(sessions) as s:
            job = applications.open_job(s, job_id)
            batch = fields[start : start + SUBMITTED]
            ids.extend(applications.submit(s, job, applications.check(f)).id for f in batch)
    return ids


def _copies(sessions: sessionmaker[Session], ids: Sequence[int]) -> list[ApplicationCopy]:
    """What `workers.delivery` reads for each application, read in one go."""
    with sessions() as s:
        found = {a.id: a for a in s.scalars(select(Application).where(Application.id.in_(ids)))}
        resumes = {
            r.application_id: r.data
            for r in s.scalars(select(Resume).where(Resume.application_id.in_(ids)))
        }
    copies = []
    for i in ids:
        a = found[i]
        copies.append(delivery.copy_of(a, resumes.get(i) if a.resume_filename else None))
    return copies


@dataclass
class _Probe:
    """CPU time of every process a delivery involves, and what the sink has counted."""

    watch: psycopg.Connection[tuple[Any, ...]]  # autocommit; its own backend is left out
    worker_pid: int
    sink: smtp_sink.Sink
    redis_pid: int

    def snapshot(self) -> _Snapshot:
        rows = self.watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        messages, size = self.sink.counts()
        return _Snapshot(
            time.process_time(),
            server.tree_cpu_seconds(self.worker_pid),
            server.cpu_seconds(self.sink.pid),
            {int(pid): server.cpu_seconds(int(pid)) for (pid,) in rows},
            server.cpu_seconds(self.redis_pid),
            messages,
            size,
        )


@dataclass(frozen=True)
class _Snapshot:
    bench: float
    worker: float
    sink: float
    postgres: dict[int, float]  # by backend pid
    redis: float
    sink_messages: int
    sink_bytes: int


def _sending(
    scenario: str,
    count: int,
    seconds: float,
    before: _Snapshot,
    after: _Snapshot,
    worker: bool,
    mails: bool = True,
) -> Sending:
    """What one delivery of `count` messages cost; `worker`: the worker sent them, else the
    bench process; `mails=False`: tasks that send nothing (the floor)."""

    def per(cpu: float) -> float:
        return cpu * 1000 / count

    postgres = sum(cpu - before.postgres.get(pid, 0.0) for pid, cpu in after.postgres.items())
    sender = after.worker - before.worker if worker else after.bench - before.bench
    sent = Sending(
        scenario=scenario,
        messages=count,
        seconds=seconds,
        per_second=count / seconds,
        sender_cpu_ms=per(sender),
        sink_cpu_ms=per(after.sink - before.sink),
        postgres_cpu_ms=per(postgres),
        redis_cpu_ms=per(after.redis - before.redis),
        sink_messages=after.sink_messages - before.sink_messages,
        sink_bytes=after.sink_bytes - before.sink_bytes,
    )
    if sent.sink_messages != (count if mails else 0):
        raise RuntimeError(f"{scenario}: sent {count}, the sink counted {sent.sink_messages}")
    print(
        f"  {scenario:<44} {sent.per_second:7,.0f} msgs/s  {seconds:6.2f} s  "
        f"{sent.sender_cpu_ms:5.2f} sender CPU ms/msg, {sent.all_cpu_ms:5.2f} in all",
        flush=True,
    )
    return sent


def _plain_loop(
    scenario: str,
    messages: Sequence[EmailMessage],
    sink: smtp_sink.Sink,
    probe: _Probe,
    *,
    kept: bool = True,
) -> Sending:
    """The baseline: the messages over one SMTP connection, as the worker keeps its; with
    `kept=False`, a connection per message (for comparison, no target)."""
    before = probe.snapshot()
    started = time.perf_counter()
    if kept:
        with smtplib.SMTP(sink.host, sink.port, timeout=30) as conn:
            for message in messages:
                conn.send_message(message)
    else:
        for message in messages:
            with smtplib.SMTP(sink.host, sink.port, timeout=30) as conn:
                conn.send_message(message)
    seconds = time.perf_counter() - started
    return _sending(scenario, len(messages), seconds, before, probe.snapshot(), worker=False)


def _enqueue(celery: Celery, ids: Sequence[int]) -> None:
    refused = [i for i in ids if not enqueue.deliver(celery, i)]
    if refused:
        raise RuntimeError(f"the broker refused {len(refused)} tasks")


def _worker_delivery(
    scenario: str, ids: Sequence[int], celery: Celery, probe: _Probe
) -> tuple[Sending, float]:
    """The worker (up, warm, idle) stops consuming the email queue; every id is enqueued;
    it consumes again. The time runs from then to the last `sent_at` it recorded, so neither
    the enqueueing nor the worker's start is in it."""
    _control(celery.control.cancel_consumer, EMAIL_QUEUE)
    started = time.perf_counter()
    _enqueue(celery, ids)
    enqueue_seconds = time.perf_counter() - started
    before = probe.snapshot()
    started_at = datetime.now(UTC)
    _control(celery.control.add_consumer, EMAIL_QUEUE)
    last_sent = _wait_sent(probe.watch, ids, timeout=max(120.0, len(ids) / 5))
    after = probe.snapshot()
    seconds = (last_sent - started_at).total_seconds()
    return _sending(scenario, len(ids), seconds, before, after, worker=True), enqueue_seconds


FLOOR_TASK = "celery.accumulate"  # Celery's own built-in task: returns its arguments


def _celery_floor(scenario: str, count: int, running: _Services, probe: _Probe) -> Sending:
    """Diagnostic, no target: `count` tasks that do nothing (Celery's built-in
    celery.accumulate) through the same worker, queue and settings, timed as the copies are:
    what a task costs before any code of ours runs but the task signals (workers.observability).
    Done when the queue is empty and nothing is left unacknowledged (acks_late: acknowledged
    after the task ran)."""
    celery = running.celery
    _control(celery.control.cancel_consumer, EMAIL_QUEUE)
    for i in range(count):
        celery.send_task(FLOOR_TASK, args=[i], queue=EMAIL_QUEUE)
    client = redis.Redis.from_url(running.redis.url)
    before = probe.snapshot()
    started = time.perf_counter()
    _control(celery.control.add_consumer, EMAIL_QUEUE)
    deadline = time.monotonic() + max(120.0, count / 5)
    while client.llen(EMAIL_QUEUE) or client.hlen(UNACKED):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{scenario}: the worker did not finish {count} tasks in time")
        time.sleep(FLOOR_POLL_SECONDS)
    seconds = time.perf_counter() - started
    client.close()
    after = probe.snapshot()
    return _sending(scenario, count, seconds, before, after, worker=True, mails=False)


UNACKED = "unacked"  # kombu's Redis transport: messages delivered and not yet acknowledged
FLOOR_POLL_SECONDS = 0.005


def _control(command: Callable[..., Any], queue: str) -> None:
    """A remote-control command to the one worker, answered before it returns (limit=1:
    without it Celery waits out the whole timeout for replies from other workers)."""
    replies = command(queue, reply=True, timeout=10, limit=1)
    if not replies or any("error" in answer for reply in replies for answer in reply.values()):
        raise RuntimeError(f"the worker answered {command.__name__}({queue!r}) with {replies}")


def _pending_again(watch: psycopg.Connection[tuple[Any, ...]], ids: Sequence[int]) -> None:
    """The sent entries back to pending and due, as `submit` left them."""
    watch.execute(
        "UPDATE outbox SET status = 'pending', attempts = 0, lease_until = NULL, "
        "sent_at = NULL, last_error = NULL, enqueued_at = NULL, "
        "next_attempt_at = now() AT TIME ZONE 'UTC' - interval '1 second' "
        "WHERE application_id = ANY(%s)",
        (list(ids),),
    )
    watch.execute("VACUUM (ANALYZE) outbox")


def _deliver_loop(
    scenario: str,
    ids: Sequence[int],
    sessions: sessionmaker[Session],
    settings: Settings,
    probe: _Probe,
) -> Sending:
    """Diagnostic: what the task body costs without Celery, `workers.delivery.deliver` called
    for each id in the bench process (claim, read, build, send, record)."""
    before = probe.snapshot()
    started = time.perf_counter()
    outcomes = [delivery.deliver(sessions, settings, i) for i in ids]
    seconds = time.perf_counter() - started
    if any(outcome != "sent" for outcome in outcomes):
        raise RuntimeError(f"{scenario}: {sorted(set(outcomes))}")
    return _sending(scenario, len(ids), seconds, before, probe.snapshot(), worker=False)


POLL_SECONDS = 0.5


def _wait_sent(
    watch: psycopg.Connection[tuple[Any, ...]], ids: Sequence[int], *, timeout: float
) -> datetime:
    """Poll the outbox until every id is sent; the last `sent_at` (UTC). The time measured
    ends at that `sent_at`, so polling seldom loses no precision, and the poll (a look-up of
    every id) takes little from the worker it watches, on the same cores."""
    deadline = time.monotonic() + timeout
    while True:
        row = watch.execute(
            "SELECT count(*) FILTER (WHERE status = 'sent'), "
            "count(*) FILTER (WHERE status = 'failed' OR (status = 'pending' AND attempts > 0)), "
            "max(sent_at) FROM outbox WHERE application_id = ANY(%s)",
            (list(ids),),
        ).fetchone()
        assert row is not None
        sent, failing, last = int(row[0]), int(row[1]), row[2]
        if failing:
            raise RuntimeError(f"{failing} deliveries failed or wait for a retry")
        if sent == len(ids):
            assert isinstance(last, datetime)
            return last.replace(tzinfo=UTC)  # stored as naive UTC
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {sent} of {len(ids)} copies sent in {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


# -- report ----------------------------------------------------------------------------------


def _report(options: Options, run: Run) -> bool:
    healthz = [m for m in run.api if m.scenario.startswith(HEALTHZ)]
    baseline = sum(m.per_second for m in healthz) / len(healthz)
    rows = [
        report.Row(
            m.scenario,
            m.per_second,
            m.result.p50_ms,
            m.result.p99_ms,
            None if m in healthz else m.per_second / baseline,
            m.worker_cpu_ms,
            m.result.requests - m.accepted + sum(m.result.socket_errors.values()),
        )
        for m in run.api
    ]
    # The delivery target is the engine bench's (bench/engine.py): a relay with a round trip,
    # sends overlapped. These zero-latency rows of one copy at a time are kept as figures.
    targets: list[report.Target] = []
    if max(run.load_average) > run.cores / 2:
        run.notes.append(
            f"the machine was busy (1-minute load average {run.load_average[0]:.1f} before, "
            f"{run.load_average[-1]:.1f} after, on {run.cores} cores): other processes "
            "competed with the bench, so trust the ratios and CPU columns more than the rates"
        )
    if run.api_enqueued != TASKS_PER_APPLICATION * run.api_stored:
        run.notes.append(
            f"the API stored {run.api_stored:,} applications but {run.api_enqueued:,} tasks "
            "(a copy and a receipt each, C20) were waiting in the queue: some enqueues failed "
            "(the sweeper would catch up)"
        )
    print(
        f"\nworkers bench: database {DATABASE} (fresh), private redis-server, SMTP sink in its "
        f"own process; gunicorn {run.cores} workers; wrk -t{options.threads} "
        f"-c{options.connections} -d{options.duration}s\n"
    )
    print("applications accepted by the API (req/s column: 202 answers per second):")
    print(report.table(rows, "/healthz"))
    print(
        f"(CPU ms/req: the gunicorn workers' CPU per request, PostgreSQL's not included; "
        f"{run.api_stored:,} applications stored, {run.api_enqueued:,} tasks enqueued)"
    )
    print(
        f"\ncopies delivered: {run.deliveries:,} of each kind; one worker process vs a plain "
        "smtplib loop in the bench process, same messages, same sink:"
    )
    head = (
        "scenario",
        "msgs/s",
        "× plain loop",
        "seconds",
        "sender CPU",
        "sink CPU",
        "PG CPU",
        "redis CPU",
        "all CPU",
    )
    body = []
    for d in run.delivery:
        for s in (d.plain[0], d.worker, d.in_process, d.floor, d.plain[1], d.fresh):
            body.append(
                (
                    s.scenario,
                    f"{s.per_second:,.0f}",
                    "baseline" if s in d.plain else f"{s.per_second / d.baseline:.2f}",
                    f"{s.seconds:.2f}",
                    f"{s.sender_cpu_ms:.2f}",
                    f"{s.sink_cpu_ms:.2f}",
                    f"{s.postgres_cpu_ms:.2f}",
                    f"{s.redis_cpu_ms:.2f}",
                    f"{s.all_cpu_ms:.2f}",
                )
            )
    print(report.grid(head, body))
    print(
        "(CPU columns: ms per message. sender = the bench process for the loops, the worker's "
        "main and pool processes for the worker; PG = the bench database's backends; all = "
        "their sum. deliver() in-process: the task's body called in a loop, without Celery, "
        "a diagnostic with no target; Celery's floor: the worker running as many tasks that "
        "do nothing (celery.accumulate), no target; a connection each: the loop opening a "
        "connection per message, no target)"
    )
    for d in run.delivery:
        print(
            f"{d.kind}: {d.message_bytes / 1024:.1f} KiB per message; build_message "
            f"{d.build_ms:.2f} ms each, outside the loop's time; baseline {d.baseline:,.0f} "
            f"msgs/s (mean of {d.plain[0].per_second:,.0f} and {d.plain[1].per_second:,.0f}); "
            f"{d.count:,} tasks enqueued in {d.enqueue_seconds:.2f} s, before the worker "
            f"consumed them; by CPU (all processes) the worker is at {d.cpu_ratio:.2f} × the "
            f"plain loop; had the loop built each message too, it would send about "
            f"{d.built_in_loop:,.0f} msgs/s and the worker be at "
            f"{d.worker.per_second / d.built_in_loop:.2f} × it; Celery alone runs "
            f"{d.floor.per_second:,.0f} tasks/s, so a worker whose tasks did nothing but send "
            f"as the loop does would reach at most {d.bound:.2f} × the loop"
        )
    print()
    print(report.targets(targets))
    for note in run.notes:
        print(f"note: {note}")
    path = options.out_dir / "workers.json"
    report.write_json(
        path,
        {
            "bench": "workers",
            "seconds": round(run.seconds, 1),
            "cores": run.cores,
            "load_average": run.load_average,
            "database": DATABASE,
            "wrk": {
                "threads": options.threads,
                "connections": options.connections,
                "duration_s": options.duration,
                "warmup_s": options.warmup,
            },
            "acceptance": {
                "baseline_rps": baseline,
                "stored": run.api_stored,
                "enqueued": run.api_enqueued,
                "scenarios": [
                    asdict(row) | {"accepted": m.accepted, "wrk": m.result}
                    for row, m in zip(rows, run.api, strict=True)
                ],
            },
            "delivery": {
                "count": run.deliveries,
                "warmup_copies": WARMUP_COPIES,
                "worker_concurrency": 1,
                "kinds": [
                    asdict(d)
                    | {
                        "cpu_ratio": d.cpu_ratio,
                        "bound_one_task_per_copy": d.bound,
                        "baseline_if_built_in_loop": d.built_in_loop,
                        "all_cpu_ms": {
                            "plain": [p.all_cpu_ms for p in d.plain],
                            "worker": d.worker.all_cpu_ms,
                            "in_process": d.in_process.all_cpu_ms,
                            "floor": d.floor.all_cpu_ms,
                        },
                    }
                    for d in run.delivery
                ],
            },
            "targets": targets,
            "notes": run.notes,
        },
    )
    print(f"\nresults: {path} ({run.seconds:.0f} s in all)")
    return all(t.passed for t in targets)
