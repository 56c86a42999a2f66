"""The delivery engine bench (C12): one worker process overlapping its sends, beside a bare
loop sending the same messages the same way.

A real relay answers the end of each message's DATA after its round trip (queueing, maybe a
spam check), tens to hundreds of milliseconds; a worker that sends one copy at a time waits
that long for each. Here the SMTP sink (`bench/smtp_sink.py --data-delay`) replies to each
DATA 100 ms late and to every other command at once. ONE worker process (`jobpost worker
--pool threads --concurrency 16`, up and warm) delivers N copies (no résumé) on PostgreSQL and
Redis; the baseline is a bare loop of 16 threads in the bench process, each keeping one
SMTP connection and sending its share of the same messages (built beforehand with the tests'
`build_message`). The loop runs before and after the worker; their mean is the baseline.
Targets: the worker at least 0.8 × the baseline, and its resident memory (all its processes,
the highest seen while it delivers) under 200 MB. A second row, no target, does the same
against a sink that answers at once: what the workers bench measures for one copy at a time.

Webhooks are measured apart, the same way: a receiver (`bench/webhook_receiver.py`, its own
process, many connections at once) answers each POST 100 ms late, then at once; the baseline
is a bare loop of 16 threads, each keeping one HTTP connection (urllib3) and POSTing the same
signed messages (`bench/webhook_loop.py`). The messages are the `application.received` events
of the same applications. The worker (the same command, WEBHOOK_ALLOW_HTTP and
WEBHOOK_ALLOW_PRIVATE set for the bench's plain local receiver only) delivers them as
webhook deliveries of one endpoint at that receiver; the receiver verifies every signature
with the Standard Webhooks library, and every POST of the loop and of the worker must verify.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import secrets
import smtplib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import psycopg
from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, sessionmaker

from api import representations
from bench import report, seed, server, smtp_sink, webhook_loop, webhook_receiver
from bench.options import Options
from bench.workers import (
    MAIL_FROM,
    Kind,
    _control,
    _copies,
    _enqueue,
    _fresh_database,
    _job,
    _service_env,
    _submit,
    _wait_sent,
)
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Application, Job, WebhookEndpoint
from models.db.unit_of_work import make_sessionmaker
from models.webhooks import messages as webhook_messages
from models.webhooks.secrets import encrypt
from tests.harness import JOBPOST, Program, RedisServer
from tests.workers.mail_reference import build_message
from workers import enqueue
from workers.app import EMAIL_QUEUE, WEBHOOKS_QUEUE, make_celery

DATABASE = "jobpost_bench_engine"
CONCURRENCY = 16
RELAY_DELAYS = (0.1, 0.0)  # seconds before DATA's reply: the target's row, then zero latency
RECEIVER_DELAYS = (0.1, 0.0)  # seconds before a POST's answer: the same two rows for webhooks
RATIO = 0.8  # target: the worker's copies/s at least this share of the bare loop's
RSS_LIMIT = 200 * 1024 * 1024  # target: the worker's resident memory, all its processes
WARMUP_COPIES = 4 * CONCURRENCY  # every thread connected to the relay and the database
# The time runs from the worker's add_consumer; its event loop may take up to a second to ask
# Redis for the queue it was given (its poll's timeout), which is no part of delivering: ten
# seconds of sends or more keep that under a tenth of the measure.
MIN_COPIES = 64 * CONCURRENCY
RSS_EVERY = 0.2  # seconds between looks at the worker's memory


@dataclass(frozen=True)
class LoopRow:
    """Webhooks: the bare loop's figures, before and after, and the worker's."""

    receiver_delay_ms: float
    messages: int
    loops: list[float]  # messages/s of the bare loop
    worker: float  # deliveries/s
    worker_seconds: float
    worker_rss_bytes: int
    baseline: float
    ratio: float


@dataclass(frozen=True)
class Row:
    relay_delay_ms: float
    messages: int
    loops: list[float]  # messages/s of the bare loop, before and after the worker
    worker: float  # copies/s
    worker_seconds: float
    worker_rss_bytes: int  # the most seen while it delivered, all its processes
    baseline: float
    ratio: float
    busy: float  # the share of the threads' time spent in tasks, from the worker's log


def run(options: Options) -> bool:
    started = time.perf_counter()
    count = max(MIN_COPIES, options.deliveries // 2)
    rows: list[Row] = []
    hooks: list[LoopRow] = []
    load = [os.getloadavg()[0]]
    url = _fresh_database(options.admin_url, DATABASE)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    job_id = _job(sessions)
    conninfo = seed.conninfo(url)
    try:
        with ExitStack() as stack:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jobpost-")))
            broker = stack.enter_context(RedisServer(workdir, options.out_dir / "engine-redis.log"))
            watch = stack.enter_context(psycopg.connect(conninfo, autocommit=True))
            for delay in RELAY_DELAYS:
                log = options.out_dir / f"engine-sink-{int(delay * 1000)}ms.log"
                sink = stack.enter_context(smtp_sink.running(log, data_delay=delay))
                env = _service_env(url, broker.url, sink, workdir)
                celery = make_celery(Settings.from_env(env))
                stack.callback(celery.close)
                print(
                    f"\nengine, relay answering DATA after {delay * 1000:.0f} ms: {count} copies,"
                    f" a bare loop of {CONCURRENCY} threads vs `jobpost worker --pool threads "
                    f"--concurrency {CONCURRENCY}`",
                    flush=True,
                )
                ids = _submit(sessions, job_id, [Kind("", None).fields(i) for i in range(count)])
                messages = [build_message(c, mail_from=MAIL_FROM) for c in _copies(sessions, ids)]
                first = _bare_loop(messages, sink)
                worker_log = options.out_dir / f"engine-worker-{int(delay * 1000)}ms.log"
                with worker(env, celery, worker_log) as pid:
                    warm = _submit(
                        sessions, job_id, [Kind("", None).fields(i) for i in range(WARMUP_COPIES)]
                    )
                    _enqueue(celery, warm)
                    _wait_sent(watch, warm, timeout=120)
                    seconds, rss = _worker_delivery(ids, celery, watch, pid)
                again = _bare_loop(messages, sink)
                baseline = (first + again) / 2
                per_second = count / seconds
                rows.append(
                    Row(
                        delay * 1000,
                        count,
                        [first, again],
                        per_second,
                        seconds,
                        rss,
                        baseline,
                        per_second / baseline,
                        _busy(worker_log, seconds),
                    )
                )
            posts = _webhook_messages(sessions, ids)
            views = [json.loads(p.body)["data"] for p in posts]
            env = {
                **env,
                "JOBPOST_SECRET_KEY": KEY.decode(),
                "WEBHOOK_ALLOW_HTTP": "true",
                "WEBHOOK_ALLOW_PRIVATE": "true",
                "WEBHOOK_ALLOWED_PORTS": "1024-65535",  # the receiver's free port
                # One endpoint against a bare loop of CONCURRENCY threads: no cap below it.
                "WEBHOOK_ENDPOINT_IN_FLIGHT": str(CONCURRENCY),
                "WEBHOOK_EMPLOYER_IN_FLIGHT": str(CONCURRENCY),
            }
            employer_id = _employer_of(sessions, job_id)
            for delay in RECEIVER_DELAYS:
                log = options.out_dir / f"engine-receiver-{int(delay * 1000)}ms.log"
                receiver = stack.enter_context(
                    webhook_receiver.running(log, delay=delay, secret=SECRET)
                )
                print(
                    f"\nengine, receiver answering after {delay * 1000:.0f} ms: {count} webhooks,"
                    f" a bare loop of {CONCURRENCY} threads vs the same worker",
                    flush=True,
                )
                first = webhook_loop.bare_loop(posts, receiver, SECRET, threads=CONCURRENCY)
                _endpoint(sessions, employer_id, receiver.url)
                worker_log = options.out_dir / f"engine-worker-hooks-{int(delay * 1000)}ms.log"
                with worker(env, celery, worker_log) as pid:
                    warm = _emit(sessions, employer_id, views[:WARMUP_COPIES])
                    enqueue.deliver_webhooks(celery, warm)
                    _wait_delivered(watch, warm, timeout=120)
                    hook_ids = _emit(sessions, employer_id, views)
                    seconds, rss = _worker_webhooks(hook_ids, celery, watch, pid)
                again = webhook_loop.bare_loop(posts, receiver, SECRET, threads=CONCURRENCY)
                counts = receiver.counts()
                if counts["verified"] != counts["posts"]:
                    raise RuntimeError(f"the receiver verified fewer POSTs than it got: {counts}")
                baseline = (first + again) / 2
                per_second = count / seconds
                hooks.append(
                    LoopRow(
                        delay * 1000,
                        count,
                        [first, again],
                        per_second,
                        seconds,
                        rss,
                        baseline,
                        per_second / baseline,
                    )
                )
    finally:
        engine.dispose()
    load.append(os.getloadavg()[0])
    return _report(options, rows, hooks, load, time.perf_counter() - started)


SECRET = "whsec_" + base64.b64encode(b"the engine bench's endpoint key!").decode()
KEY = base64.urlsafe_b64encode(b"the engine bench's Fernet key 32")  # encrypts SECRET


def _employer_of(sessions: sessionmaker[Session], job_id: int) -> int:
    with sessions() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job.employer_id


def _endpoint(sessions: sessionmaker[Session], employer_id: int, url: str) -> None:
    """The employer's one enabled endpoint: at `url`, for `application.received`, signing
    with SECRET; an earlier run's is disabled."""
    now = datetime.now(UTC)
    with sessions() as s:
        for old in s.scalars(
            select(WebhookEndpoint).where(WebhookEndpoint.employer_id == employer_id)
        ):
            old.status = "disabled"
        s.add(
            WebhookEndpoint(
                employer_id=employer_id,
                url=url,
                events=webhook_messages.events_json(["application.received"]),
                description="engine bench",
                status="enabled",
                secret=encrypt(SECRET, KEY),
                created_at=now,
                updated_at=now,
            )
        )
        s.commit()


def _emit(sessions: sessionmaker[Session], employer_id: int, views: Sequence[object]) -> list[int]:
    """One `application.received` event per view, as the service writes them (three
    statements); the ids of their deliveries, marked enqueued as the service marks those it
    enqueues."""
    now = datetime.now(UTC)
    with sessions() as s:
        ids = webhook_messages.emit_batch(
            s, "application.received", [(employer_id, v) for v in views], now=now
        )
        out = webhook_messages.pending_of(s, ids, now=now)
        s.commit()
    return out


def _wait_delivered(
    watch: psycopg.Connection[tuple[object, ...]], ids: Sequence[int], *, timeout: float
) -> datetime:
    """Wait until every delivery of `ids` succeeded; the last delivered_at."""
    deadline = time.monotonic() + timeout
    while True:
        row = watch.execute(
            "SELECT count(*), max(delivered_at), count(*) FILTER (WHERE status = 'failed')"
            " FROM webhook_deliveries WHERE id = ANY(%s) AND status IN ('succeeded', 'failed')",
            (list(ids),),
        ).fetchone()
        assert row is not None
        done, last, failed = row
        if failed:
            raise RuntimeError(f"{failed} webhook deliveries failed")
        if done == len(ids):
            assert isinstance(last, datetime)
            return last if last.tzinfo else last.replace(tzinfo=UTC)  # stored as naive UTC
        if time.monotonic() > deadline:
            raise RuntimeError(f"{done} of {len(ids)} webhook deliveries in {timeout:.0f} s")
        time.sleep(0.1)


def _webhook_messages(
    sessions: sessionmaker[Session], ids: Sequence[int]
) -> list[webhook_loop.Message]:
    """The `application.received` event of each application, as C12 has a message say it:
    the employer's view of the application (the API's), and no résumé to link to."""
    with sessions() as s:
        found = s.scalars(
            select(Application)
            .where(Application.id.in_(ids))
            .options(selectinload(Application.outbox))
            .order_by(Application.id)
        )
        views = [representations.application(a) | {"resumeUrl": None} for a in found]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        webhook_loop.Message(
            f"msg_{secrets.token_urlsafe(16)}",
            json.dumps({"type": "application.received", "timestamp": now, "data": view}).encode(),
        )
        for view in views
    ]


@contextmanager
def worker(env: Mapping[str, str], celery: Celery, log: Path) -> Iterator[int]:
    """`jobpost worker --pool threads --concurrency 16` until it answers a ping; yields its
    pid. Stopped with a warm shutdown (SIGTERM), its group killed after."""
    command = [
        *JOBPOST,
        "worker",
        "--pool",
        "threads",
        "--concurrency",
        str(CONCURRENCY),
    ]
    with Program(command, log, env=env, name="the worker", stop_timeout=20) as proc:
        proc.wait_until(
            lambda: bool(celery.control.ping(timeout=0.5)),
            timeout=server.START_TIMEOUT,
            what=f"the worker to answer (log: {log})",
        )
        yield proc.pid


def _bare_loop(messages: Sequence[EmailMessage], sink: smtp_sink.Sink) -> float:
    """Messages/s of CONCURRENCY threads, each keeping one connection and sending messages
    from a shared queue until it is empty."""
    todo: queue.SimpleQueue[EmailMessage] = queue.SimpleQueue()
    for message in messages:
        todo.put(message)
    before, _ = sink.counts()
    failures: list[BaseException] = []

    def send() -> None:
        try:
            with smtplib.SMTP(sink.host, sink.port, timeout=30) as conn:
                while True:
                    try:
                        message = todo.get_nowait()
                    except queue.Empty:
                        return
                    conn.send_message(message)
        except BaseException as e:  # shown after the threads are joined
            failures.append(e)

    threads = [threading.Thread(target=send) for _ in range(CONCURRENCY)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    sent = sink.counts()[0] - before
    if failures or sent != len(messages):
        raise RuntimeError(f"bare loop: the sink counted {sent} of {len(messages)}: {failures}")
    print(f"  bare loop, {CONCURRENCY} threads: {len(messages) / seconds:7,.0f} msgs/s", flush=True)
    return len(messages) / seconds


def _worker_delivery(
    ids: Sequence[int],
    celery: Celery,
    watch: psycopg.Connection[tuple[object, ...]],
    pid: int,
) -> tuple[float, int]:
    """The copies, as the workers bench times its worker: to the last `sent_at`."""
    return _timed_worker(
        len(ids),
        celery,
        pid,
        lambda: _enqueue(celery, ids),
        lambda: _wait_sent(watch, ids, timeout=max(120.0, len(ids) / 5)),
        "copies",
    )


def _worker_webhooks(
    ids: Sequence[int],
    celery: Celery,
    watch: psycopg.Connection[tuple[object, ...]],
    pid: int,
) -> tuple[float, int]:
    """The webhook deliveries, timed the same way: to the last `delivered_at`."""
    return _timed_worker(
        len(ids),
        celery,
        pid,
        lambda: enqueue.deliver_webhooks(celery, list(ids)),
        lambda: _wait_delivered(watch, ids, timeout=max(120.0, len(ids) / 5)),
        "deliveries",
        queue=WEBHOOKS_QUEUE,
    )


def _timed_worker(
    count: int,
    celery: Celery,
    pid: int,
    send: Callable[[], object],
    wait: Callable[[], datetime],
    unit: str,
    queue: str = EMAIL_QUEUE,
) -> tuple[float, int]:
    """The queue stopped while `send` enqueues the tasks, then timed from add_consumer to
    what `wait` returns (the last one done). Also the most memory the worker held."""
    _control(celery.control.cancel_consumer, queue)
    send()
    highest = [server.tree_rss_bytes(pid)]
    done = threading.Event()

    def watch_memory() -> None:
        while not done.wait(RSS_EVERY):
            highest.append(server.tree_rss_bytes(pid))

    watcher = threading.Thread(target=watch_memory, daemon=True)
    watcher.start()
    started_at = datetime.now(UTC)
    _control(celery.control.add_consumer, queue)
    try:
        last = wait()
    finally:
        done.set()
        watcher.join()
    seconds = (last - started_at).total_seconds()
    rss = max(highest)
    print(
        f"  worker, threads × {CONCURRENCY}:      {count / seconds:7,.0f} {unit}/s, "
        f"{rss / 1e6:.1f} MB resident",
        flush=True,
    )
    return seconds, rss


def _busy(log: Path, seconds: float) -> float:
    """The share of its threads' time the worker spent running the measured tasks: the
    durations its task log lines give (workers.observability), past the warm-up's."""
    durations = [
        float(line["duration_ms"]) / 1000
        for line in map(json.loads, (t for t in log.read_text().splitlines() if t.startswith("{")))
        if line.get("event") == "task" and line.get("task") == "jobpost.deliver"
    ]
    return sum(durations[WARMUP_COPIES:]) / (CONCURRENCY * seconds)


def _report(
    options: Options, rows: list[Row], hooks: list[LoopRow], load: list[float], seconds: float
) -> bool:
    targets = []
    for row in rows:
        if row.relay_delay_ms:
            targets.append(
                report.Target(
                    f"worker copies/s ≥ {RATIO} × a bare loop of {CONCURRENCY} threads, relay "
                    f"{row.relay_delay_ms:.0f} ms",
                    f"{row.worker:,.0f} copies/s = {row.ratio:.2f} × {row.baseline:,.0f}",
                    row.ratio >= RATIO,
                )
            )
        targets.append(
            report.Target(
                f"worker resident memory < {RSS_LIMIT // 2**20} MB, relay "
                f"{row.relay_delay_ms:.0f} ms",
                f"{row.worker_rss_bytes / 2**20:.1f} MB",
                row.worker_rss_bytes < RSS_LIMIT,
            )
        )
    for h in hooks:
        if h.receiver_delay_ms:
            targets.append(
                report.Target(
                    f"worker webhooks/s ≥ {RATIO} × a bare loop of {CONCURRENCY} threads, "
                    f"receiver {h.receiver_delay_ms:.0f} ms",
                    f"{h.worker:,.0f} deliveries/s = {h.ratio:.2f} × {h.baseline:,.0f}",
                    h.ratio >= RATIO,
                )
            )
        targets.append(
            report.Target(
                f"worker resident memory < {RSS_LIMIT // 2**20} MB, webhooks, receiver "
                f"{h.receiver_delay_ms:.0f} ms",
                f"{h.worker_rss_bytes / 2**20:.1f} MB",
                h.worker_rss_bytes < RSS_LIMIT,
            )
        )
    head = (
        "relay DATA reply",
        "copies",
        "loop msgs/s",
        "worker copies/s",
        "× loop",
        "threads busy",
        "RSS MB",
    )
    body = [
        (
            f"{r.relay_delay_ms:.0f} ms",
            f"{r.messages:,}",
            f"{r.baseline:,.0f} ({r.loops[0]:,.0f}, {r.loops[1]:,.0f})",
            f"{r.worker:,.0f}",
            f"{r.ratio:.2f}",
            f"{r.busy:.0%}",
            f"{r.worker_rss_bytes / 2**20:.1f}",
        )
        for r in rows
    ]
    print(
        f"\nengine bench: one worker process, threads pool × {CONCURRENCY}, PostgreSQL and a "
        f"private redis-server; baseline a bare loop of {CONCURRENCY} threads (mean of before "
        f"and after); load average {load[0]:.1f} before, {load[-1]:.1f} after\n"
    )
    print(report.grid(head, body))
    print("\nwebhooks: the same worker delivering application.received, every POST verified\n")
    print(
        report.grid(
            ("receiver answer", "messages", "loop posts/s", "worker posts/s", "× loop", "RSS MB"),
            [
                (
                    f"{h.receiver_delay_ms:.0f} ms",
                    f"{h.messages:,}",
                    f"{h.baseline:,.0f} ({h.loops[0]:,.0f}, {h.loops[1]:,.0f})",
                    f"{h.worker:,.0f}",
                    f"{h.ratio:.2f}",
                    f"{h.worker_rss_bytes / 2**20:.1f}",
                )
                for h in hooks
            ],
        )
    )
    print()
    print(report.targets(targets))
    path = options.out_dir / "engine.json"
    report.write_json(
        path,
        {
            "bench": "engine",
            "seconds": round(seconds, 1),
            "cores": server.cores(),
            "load_average": load,
            "concurrency": CONCURRENCY,
            "rows": [asdict(r) for r in rows],
            "webhook_loops": [asdict(h) for h in hooks],
            "targets": targets,
        },
    )
    print(f"\nresults: {path} ({seconds:.0f} s in all)")
    return all(t.passed for t in targets)
