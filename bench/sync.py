"""The sync bench (issue 16): ten thousand jobs kept in step by one sync run (C11), beside the
same jobs sent one `PUT /api/v1.1/jobs` at a time.

On the seeded bench database (PostgreSQL, the big employer already holding 200,000 jobs) with
a private redis-server as the broker: `jobpost serve --workers 2` and ONE `jobpost worker`
process (`--concurrency 1`), which consumes the `syncs` queue. The jobs are
`bench.sync_data.jobs`: distinct titles and descriptions of a few hundred words, 1 to 3 of 300
places in 11 provinces and territories, salaries.

1. Baseline: the 10,000 sent as `PUT /api/v1.1/jobs` by 8 connections (each sends its next as
   soon as its last is answered): every one a create (201). Then the same again, unchanged
   (200). The jobs are then deleted, so the run creates them afresh.
2. Runs: the 10,000 as one snapshot run (`POST /api/v1.1/syncs`), timed from its 202 to
   `completed` (GET /syncs/{id} polled every 50 ms); the POST itself (intake) is timed apart.
   A snapshot archives the employer's active jobs that it leaves out (C11), which the PUT loop
   cannot do: so that both do the same, the bench archives those jobs itself beforehand
   (24,945 of the seed's) and puts them back afterwards. Then the same snapshot again (every
   item unchanged).
3. GET one job at a fixed rate for the run's duration, alone and then while a third run (every
   item changed) goes on: the p99 of each, no target.
4. Intake of a body of about 50 MiB (the same 10,000 with longer descriptions, an open run so
   that it is never applied; cancelled after): the web process's peak memory.

Targets: the create run at least 5 times as fast as the PUT loop (the goal is 10), the resend
at least 10 times; the worker's resident memory (all its processes, sampled every 0.1 s during
the runs) under 250 MB; the web process under 300 MB while it takes the 50 MiB body.
Everything the bench created is deleted at the end and the archived jobs are restored, so the
other benches find the seed as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text

from bench import api, loads, memory, report, seed, server, sync_data
from bench.http import Client, Response
from bench.options import Options
from models.core.settings import VARIABLES
from models.db.engines import make_engine
from tests.harness import JOBPOST, Program, RedisServer, free_port, wait_for

API = "/api/v1.1"
SYNCS = f"{API}/syncs"
JOBS = 10_000
CONNECTIONS = 8  # the PUT loop's, as the issue asks
WEB_WORKERS = 2  # `jobpost serve --workers 2`
WARMUP = 100  # drafts written through each side before it is timed (snapshots leave drafts be)
POLL = 0.05  # seconds between reads of a run while it goes on
RUN_TIMEOUT = 1800.0  # seconds a run may take before the bench gives up on it
WARM_TIMEOUT = 120.0  # the worker's warm-up run (it may not consume the syncs queue at all)
CREATE_RATIO = 5.0  # target: the create run at least this many times as fast as the PUT loop
CREATE_GOAL = 10.0
RESEND_RATIO = 10.0  # target: the resend run
WORKER_RSS = 250 * 2**20  # target: the worker, all its processes, during the runs
WEB_RSS = 300 * 2**20  # target: the web process taking a 50 MiB body
BIG_BODY = 50 * 2**20 - 64 * 2**10  # just within C11's 50 MiB
GET_RATE = 50.0  # GET one job, requests a second
SAVED = "bench_sync_saved"  # the employer's jobs a snapshot may archive, as they were


@dataclass(frozen=True)
class Loop:
    """The PUT loop over all the jobs once."""

    name: str
    sent: loads.Sent
    web_cpu_ms: float  # the gunicorn workers' CPU per job
    db_cpu_ms: float  # the PostgreSQL backends' CPU per job


@dataclass(frozen=True)
class SyncRun:
    """One sync run, as the bench saw it."""

    name: str
    intake_seconds: float  # the POST, to its 202
    intake_bytes: int
    seconds: float  # from the 202 to `completed`
    resource: dict[str, Any]  # the sync resource when it was completed
    worker_rss_bytes: int  # the most seen while it ran, all the worker's processes
    worker_cpu_ms: float  # the worker's CPU per item
    db_cpu_ms: float  # the PostgreSQL backends' CPU per item

    @property
    def rate(self) -> float:
        return int(self.resource["total"]) / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Intake:
    """A body of about 50 MiB taken by the web process."""

    bytes: int
    status: int
    seconds: float
    sampled_rss_bytes: int  # the most seen in any web worker while it was taken, every 20 ms
    high_water_bytes: int  # the most any web worker has held since it started (VmHWM)


@dataclass
class Result:
    seed: seed.Seed
    places: int
    provinces: int
    body_bytes: float  # the mean size of a job's body
    loops: list[Loop] = field(default_factory=list)
    runs: list[SyncRun] = field(default_factory=list)
    gets: dict[str, loads.Paced] = field(default_factory=dict)
    intake: Intake | None = None
    load_average: list[float] = field(default_factory=list)
    archived_beforehand: int = 0  # the employer's active jobs a snapshot would have archived
    restored: int = 0  # jobs put back as they were
    commit_ms: float = 0.0  # a durable commit of the bench database, median
    seconds: float = 0.0


def run(options: Options) -> bool:
    started = time.perf_counter()
    seeded = seed.ensure(options)
    _forget_runs(seeded)  # an interrupted bench's open run would make ours wait (409)
    key = seed.issue_key(seeded, seeded.big_employer_id)
    engine = make_engine(seeded.url)
    try:
        with engine.connect() as conn:
            pool = sync_data.places(conn)
    finally:
        engine.dispose()
    bodies = sync_data.jobs(pool, JOBS)
    encoded = [json.dumps(b).encode() for b in bodies]
    result = Result(
        seeded,
        len(pool),
        len({p.province for p in pool}),
        sum(map(len, encoded)) / len(encoded),
        load_average=[os.getloadavg()[0]],
    )
    print(
        f"\nsync: {JOBS:,} jobs ({result.body_bytes:,.0f} bytes each on average; {len(pool)} "
        f"places in {result.provinces} provinces and territories) for the employer holding "
        f"{seeded.big_employer_jobs:,} jobs",
        flush=True,
    )
    out = options.out_dir
    result.archived_beforehand = _archive_beforehand(seeded)
    result.commit_ms = api._commit_ms(seeded.url)
    try:
        with ExitStack() as stack:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jobpost-")))
            broker = stack.enter_context(RedisServer(workdir, out / "sync-redis.log"))
            env = _service_env(seeded.url, broker.url, workdir)
            srv = stack.enter_context(
                server.gunicorn(seeded.url, WEB_WORKERS, out / "sync-server.log", env)
            )
            client = Client(srv.base_url, key, timeout=600)
            _put_loops(srv, key, pool, bodies, encoded, result)
            _delete_jobs(seeded, [b["referenceId"] for b in bodies])
            pid = stack.enter_context(_worker(env, client, pool, out / "sync-worker.log"))
            _runs(srv, client, pid, bodies, result, options)
            result.intake = _intake(srv, client, bodies)
        result.load_average.append(os.getloadavg()[0])
    finally:
        result.restored = _restore(seeded)
        _forget_runs(seeded)  # before the jobs: their items name them
        seed.remove_bench_rows(seeded, key)
    result.seconds = time.perf_counter() - started
    return _report(options, result)


# -- set-up ----------------------------------------------------------------------------------


def _service_env(database_url: str, broker_url: str, workdir: Path) -> dict[str, str]:
    """What the server and the worker see: none of the caller's jobpost settings."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    (workdir / "prometheus").mkdir(parents=True, exist_ok=True)
    env.update(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        PROMETHEUS_MULTIPROC_DIR=str(workdir / "prometheus"),
        WORKER_METRICS_PORT=str(free_port()),
        JOBPOST_VAR_DIR=str(workdir),
        PYTHONUNBUFFERED="1",
    )
    return env


def _archive_beforehand(seeded: seed.Seed) -> int:
    """Archive the employer's active jobs with a referenceId, keeping their rows to put back
    after the bench. A snapshot archives such jobs when it leaves them out (C11), and the PUT
    loop it is measured against cannot; archived beforehand, the create run does what the
    loop does. A table left by an interrupted run is put back first: it holds the seed's
    state, the jobs may not. Returns how many were archived."""
    _restore(seeded)
    with psycopg.connect(seed.conninfo(seeded.url), autocommit=True) as conn, conn.transaction():
        conn.execute(
            f"CREATE UNLOGGED TABLE {SAVED} AS SELECT * FROM jobs WHERE employer_id = %s "
            "AND id <= %s AND status = 'active' AND reference_id IS NOT NULL",
            (seeded.big_employer_id, seeded.max_job_id),
        )
        return conn.execute(
            f"UPDATE jobs SET status = 'archived' WHERE id IN (SELECT id FROM {SAVED})"
        ).rowcount


def _restore(seeded: seed.Seed) -> int:
    """Put the saved jobs back as they were (the rows that changed); drop the saved table."""
    with psycopg.connect(seed.conninfo(seeded.url), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (SAVED,)).fetchone() != (True,):
            return 0
        columns = [
            str(name)
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs' "
                "AND table_schema = current_schema() AND column_name <> 'id' "
                "ORDER BY ordinal_position"
            )
        ]
        listed = ", ".join(columns)
        with conn.transaction():
            restored = conn.execute(
                f"UPDATE jobs j SET ({listed}) = ({', '.join(f's.{c}' for c in columns)}) "
                f"FROM {SAVED} s WHERE j.id = s.id AND ({', '.join(f'j.{c}' for c in columns)}) "
                f"IS DISTINCT FROM ({', '.join(f's.{c}' for c in columns)})"
            ).rowcount
            conn.execute(f"DROP TABLE {SAVED}")
        return restored


def _delete_jobs(seeded: seed.Seed, references: Sequence[str]) -> None:
    """Delete the jobs the PUT loop created, so that the run creates them again."""
    with psycopg.connect(seed.conninfo(seeded.url), autocommit=True) as conn:
        conn.execute(
            "DELETE FROM jobs WHERE employer_id = %s AND id > %s AND reference_id = ANY(%s)",
            (seeded.big_employer_id, seeded.max_job_id, list(references)),
        )
        for table in seed.SEED_TABLES:
            conn.execute(f"VACUUM (ANALYZE) {table}")


def _forget_runs(seeded: seed.Seed) -> None:
    """Delete the sync runs of the bench (their items go with them)."""
    with psycopg.connect(seed.conninfo(seeded.url), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('sync_runs') IS NOT NULL").fetchone() == (True,):
            conn.execute("DELETE FROM sync_runs WHERE employer_id = %s", (seeded.big_employer_id,))


@contextmanager
def _worker(
    env: Mapping[str, str], client: Client, pool: Sequence[sync_data.Place], log: Path
) -> Iterator[int]:
    """ONE `jobpost worker` process (`--concurrency 1`), warmed by an upsert run of drafts
    (imports, connections, the places it names); yields its pid."""
    command = [*JOBPOST, "worker", "--concurrency", "1"]
    with Program(command, log, env=env, name="the worker", stop_timeout=30) as proc:
        proc.wait_until(
            lambda: " ready." in proc.text(),
            timeout=server.START_TIMEOUT,
            what=f"the worker to be ready (log: {log})",
        )
        answer = _post_run(client, {"mode": "upsert", "jobs": _drafts(pool, "WARMRUN")})
        _wait_run(client, answer.json()["id"], proc, timeout=WARM_TIMEOUT)
        yield proc.pid


def _drafts(pool: Sequence[sync_data.Place], prefix: str) -> list[dict[str, Any]]:
    """WARMUP draft jobs: written to warm a side up, left alone by snapshot archiving."""
    return [b | {"status": "draft"} for b in sync_data.jobs(pool, WARMUP, prefix=prefix)]


# -- 1. the PUT loop ----------------------------------------------------------------------------


def _put_loops(
    srv: server.Server,
    key: str,
    pool: Sequence[sync_data.Place],
    bodies: Sequence[dict[str, Any]],
    encoded: Sequence[bytes],
    result: Result,
) -> None:
    headers = {"API-Key": key}
    warm = [json.dumps(b).encode() for b in _drafts(pool, "WARMWEB")]
    loads.send_all(srv.base_url, "PUT", f"{API}/jobs", warm, headers, connections=CONNECTIONS)
    print(
        f"\nPUT loop: {len(bodies):,} × PUT {API}/jobs, {CONNECTIONS} connections, "
        f"`jobpost serve --workers {WEB_WORKERS}`",
        flush=True,
    )
    for name, expect in (("create", 201), ("resend", 200)):
        web, db = srv.cpu_seconds(), _backends_cpu(result.seed.url)
        sent = loads.send_all(
            srv.base_url, "PUT", f"{API}/jobs", encoded, headers, connections=CONNECTIONS
        )
        if sent.statuses != {expect: len(encoded)}:
            raise RuntimeError(f"PUT loop ({name}): answers {sent.statuses}, {sent.errors}")
        loop = Loop(
            name,
            sent,
            (srv.cpu_seconds() - web) * 1000 / len(encoded),
            _db_cpu_since(result.seed.url, db) * 1000 / len(encoded),
        )
        result.loops.append(loop)
        print(
            f"  {name:<8} {sent.seconds:7.1f} s  {sent.rate:7,.0f} jobs/s  "
            f"{loop.web_cpu_ms:5.2f} web CPU ms/job  {loop.db_cpu_ms:5.2f} DB CPU ms/job",
            flush=True,
        )


def _backends_cpu(url: str) -> dict[int, float]:
    """CPU seconds of each client backend of the bench database, by pid: the connections
    of the server, the worker and the bench, not autovacuum, which a long run may wake and
    which `api._backends_cpu` would count."""
    conninfo = seed.conninfo(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        pids = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return {pid: server.cpu_seconds(pid) for (pid,) in pids}


def _db_cpu_since(url: str, before: dict[int, float]) -> float:
    after = _backends_cpu(url)
    return sum(s - before.get(pid, 0.0) for pid, s in after.items())


# -- 2. and 3. the runs ----------------------------------------------------------------------


def _post_run(client: Client, body: dict[str, Any]) -> Response:
    answer = client.request("POST", SYNCS, json.dumps(body))
    if answer.status != 202:
        raise RuntimeError(f"POST {SYNCS}: {answer.status} {answer.body[:500]!r}")
    return answer


def _wait_run(
    client: Client, run_id: int, worker: Program | None = None, timeout: float = RUN_TIMEOUT
) -> dict[str, Any]:
    """The run's resource once it is completed, read every POLL seconds."""
    done: dict[str, Any] = {}

    def completed() -> bool:
        if worker is not None:
            worker.alive()
        answer = client.request("GET", f"{SYNCS}/{run_id}")
        if answer.status != 200:
            raise RuntimeError(f"GET {SYNCS}/{run_id}: {answer.status} {answer.body[:300]!r}")
        resource: dict[str, Any] = answer.json()
        if resource["status"] in ("cancelled",):
            raise RuntimeError(f"run {run_id} was cancelled: {resource}")
        done.update(resource)
        return bool(resource["status"] == "completed")

    wait_for(completed, timeout=timeout, what=f"run {run_id} to complete", interval=POLL)
    return done


def _runs(
    srv: server.Server,
    client: Client,
    pid: int,
    bodies: Sequence[dict[str, Any]],
    result: Result,
    options: Options,
) -> None:
    print(f"\nsync runs: one snapshot of {len(bodies):,} jobs, `jobpost worker` pid {pid}")
    get = f"{API}/jobs/{_a_job(result.seed)}"
    headers = {"API-Key": client.api_key or ""}
    seconds = max(options.duration, 10)
    for name, items, expect in (
        ("create", bodies, "created"),
        ("resend", bodies, "unchanged"),
    ):
        run = _timed_run(client, result.seed.url, pid, name, items)
        _check_outcomes(run, expect, len(items))
        result.runs.append(run)
    result.gets["no run"] = loads.paced(srv.base_url, get, headers, rate=GET_RATE, seconds=seconds)
    done = threading.Event()
    paced: list[loads.Paced] = []
    getter = threading.Thread(
        target=lambda: paced.append(
            loads.paced(
                srv.base_url, get, headers, rate=GET_RATE, seconds=RUN_TIMEOUT, stop=done.is_set
            )
        )
    )
    getter.start()
    try:
        run = _timed_run(client, result.seed.url, pid, "update", sync_data.changed(bodies))
    finally:
        done.set()
        getter.join()
    _check_outcomes(run, "updated", len(bodies))
    result.runs.append(run)
    result.gets["during a run"] = paced[0]
    for name, measured in result.gets.items():
        print(
            f"  GET one job at {GET_RATE:.0f}/s, {name:<13} p50 {measured.p50_ms:6.2f} ms  "
            f"p99 {measured.p99_ms:6.2f} ms  ({measured.requests} requests, "
            f"{measured.statuses})",
            flush=True,
        )


def _a_job(seeded: seed.Seed) -> int:
    """A job of the big employer, the one GET one job reads."""
    engine = make_engine(seeded.url)
    try:
        with engine.connect() as conn:
            found = conn.scalar(
                text("SELECT min(id) FROM jobs WHERE employer_id = :e"),
                {"e": seeded.big_employer_id},
            )
    finally:
        engine.dispose()
    return int(found)


def _timed_run(
    client: Client, url: str, pid: int, name: str, items: Sequence[dict[str, Any]]
) -> SyncRun:
    body = json.dumps({"mode": "snapshot", "jobs": list(items)})
    worker_cpu, db = server.tree_cpu_seconds(pid), _backends_cpu(url)
    with memory.Peak(lambda: server.tree_rss_bytes(pid)) as peak:
        started = time.perf_counter()
        answer = client.request("POST", SYNCS, body)
        accepted = time.perf_counter()
        if answer.status != 202:
            raise RuntimeError(f"POST {SYNCS} ({name}): {answer.status} {answer.body[:500]!r}")
        resource = _wait_run(client, answer.json()["id"])
        finished = time.perf_counter()
    total = max(len(items), 1)
    run = SyncRun(
        name,
        accepted - started,
        len(body.encode()),
        finished - accepted,
        resource,
        peak.highest,
        (server.tree_cpu_seconds(pid) - worker_cpu) * 1000 / total,
        _db_cpu_since(url, db) * 1000 / total,
    )
    print(
        f"  {name:<8} intake {run.intake_seconds:5.2f} s, run {run.seconds:7.1f} s  "
        f"{run.rate:7,.0f} jobs/s  {run.worker_cpu_ms:5.2f} worker CPU ms/job  "
        f"{run.db_cpu_ms:5.2f} DB CPU ms/job  {run.worker_rss_bytes / 2**20:6.1f} MB  "
        f"{_outcomes(resource)}",
        flush=True,
    )
    return run


def _outcomes(resource: Mapping[str, Any]) -> str:
    names = ("created", "updated", "unchanged", "archived", "failed")
    return ", ".join(f"{resource.get(n, 0):,} {n}" for n in names if resource.get(n))


def _check_outcomes(run: SyncRun, outcome: str, count: int) -> None:
    """Every item was applied, none failed, and a create run created them all: a bench of
    runs that fail measures nothing. Which of updated and unchanged the service counts an
    item as is its own business (C10), shown in the table."""
    resource = run.resource
    expected = resource.get("processed") == count and not resource.get("failed")
    created = resource.get("created", 0)
    if not expected or (created != count if outcome == "created" else created):
        raise RuntimeError(f"{run.name} run: {count:,} {outcome} expected, got {resource}")


# -- 4. a 50 MiB body --------------------------------------------------------------------------


def _intake(srv: server.Server, client: Client, bodies: Sequence[dict[str, Any]]) -> Intake:
    """An open run of about 50 MiB: the web process's memory while it takes it. Open, it is
    never applied; it is cancelled after."""
    items = sync_data.padded(bodies, BIG_BODY, prefix="BIG")
    body = json.dumps({"mode": "snapshot", "open": True, "jobs": items})
    del items
    size = len(body.encode())
    with memory.Peak(lambda: max(srv.rss_bytes().values(), default=0), every=0.02) as peak:
        started = time.perf_counter()
        answer = client.request("POST", SYNCS, body)
        seconds = time.perf_counter() - started
    if answer.status == 202:
        cancel = client.request("POST", f"{SYNCS}/{answer.json()['id']}/cancel")
        if cancel.status != 200:
            raise RuntimeError(f"cancel of the open run: {cancel.status} {cancel.body[:300]!r}")
    high = max(
        (b for p in srv.worker_pids() if (b := memory.high_water_bytes(p)) is not None),
        default=0,
    )
    intake = Intake(size, answer.status, seconds, peak.highest, high)
    print(
        f"\nintake of {size / 2**20:.1f} MiB: {answer.status} in {seconds:.1f} s; web worker "
        f"{peak.highest / 2**20:.1f} MB sampled, {high / 2**20:.1f} MB at its highest (VmHWM)",
        flush=True,
    )
    return intake


# -- the report ------------------------------------------------------------------------------


def targets(result: Result) -> list[report.Target]:
    """The issue's targets, from what was measured (a figure missing fails its target)."""
    loops = {loop.name: loop for loop in result.loops}
    runs = {run.name: run for run in result.runs}
    found: list[report.Target] = []
    for name, ratio, goal in (("create", CREATE_RATIO, CREATE_GOAL), ("resend", RESEND_RATIO, 0)):
        loop, sync = loops.get(name), runs.get(name)
        times = loop.sent.seconds / sync.seconds if loop and sync and sync.seconds else 0.0
        measured = (
            f"{times:.1f}× ({sync.seconds:.1f} s vs {loop.sent.seconds:.1f} s; "
            f"{sync.rate:,.0f} vs {loop.sent.rate:,.0f} jobs/s)"
            if loop and sync
            else "not measured"
        )
        found.append(
            report.Target(
                f"{name} run ≥ {ratio:.0f}× the PUT loop"
                + (f" (goal {goal:.0f}×{', met' if times >= goal else ''})" if goal else ""),
                measured,
                times >= ratio,
            )
        )
    worker = max((run.worker_rss_bytes for run in result.runs), default=0)
    found.append(
        report.Target(
            f"worker resident memory (all its processes) < {WORKER_RSS // 2**20} MB in the runs",
            f"{worker / 2**20:.1f} MB" if result.runs else "not measured",
            bool(result.runs) and worker < WORKER_RSS,
        )
    )
    intake = result.intake
    web = max(intake.sampled_rss_bytes, intake.high_water_bytes) if intake else 0
    found.append(
        report.Target(
            f"web process < {WEB_RSS // 2**20} MB taking a {BIG_BODY / 2**20:.0f} MiB body",
            (
                f"{web / 2**20:.1f} MB (answer {intake.status}, {intake.bytes / 2**20:.1f} MiB "
                f"in {intake.seconds:.1f} s)"
                if intake
                else "not measured"
            ),
            intake is not None and intake.status == 202 and web < WEB_RSS,
        )
    )
    return found


def table(result: Result) -> str:
    loops = {loop.name: loop for loop in result.loops}
    head = ("scenario", "jobs", "seconds", "jobs/s", "× PUT loop", "CPU ms/job", "DB CPU ms/job")
    body: list[tuple[str, ...]] = []
    for loop in result.loops:
        body.append(
            (
                f"PUT loop, {loop.name} ({CONNECTIONS} connections)",
                f"{loop.sent.requests:,}",
                f"{loop.sent.seconds:.1f}",
                f"{loop.sent.rate:,.0f}",
                "baseline",
                f"{loop.web_cpu_ms:.2f} web",
                f"{loop.db_cpu_ms:.2f}",
            )
        )
    for run in result.runs:
        baseline = loops.get(run.name) or loops.get("create")
        times = baseline.sent.seconds / run.seconds if baseline and run.seconds else 0.0
        body.append(
            (
                f"sync run, {run.name} (intake {run.intake_seconds:.2f} s)",
                f"{run.resource['total']:,}",
                f"{run.seconds:.1f}",
                f"{run.rate:,.0f}",
                f"{times:.1f}" + ("" if run.name in loops else " (× create loop)"),
                f"{run.worker_cpu_ms:.2f} worker",
                f"{run.db_cpu_ms:.2f}",
            )
        )
    return report.grid(head, body)


def _report(options: Options, result: Result) -> bool:
    found = targets(result)
    s = result.seed
    print(
        f"\nsync bench: {JOBS:,} jobs for the employer holding {s.big_employer_jobs:,} "
        f"({s.jobs:,} in all); `jobpost serve --workers {WEB_WORKERS}`, one `jobpost worker "
        f"--concurrency 1`, a private redis-server; load average {result.load_average[0]:.1f} "
        f"before, {result.load_average[-1]:.1f} after, on {server.cores()} cores\n"
    )
    print(table(result))
    print(
        f"(the employer's {result.archived_beforehand:,} active jobs with a referenceId were "
        "archived beforehand, so that the snapshots leave out nothing, and put back after; "
        f"{result.restored:,} restored)"
    )
    for name, measured in result.gets.items():
        print(
            f"GET one job at {GET_RATE:.0f} req/s, {name}: p99 {measured.p99_ms:.2f} ms "
            f"(p50 {measured.p50_ms:.2f}, max {measured.max_ms:.2f}; {measured.requests} requests)"
        )
    if result.commit_ms:
        print(
            f"a durable commit of the bench database: {result.commit_ms:.1f} ms (median of "
            f"{api.COMMITS}): a run that commits each item apart cannot pass "
            f"{1000 / result.commit_ms:,.0f} jobs/s here"
        )
    print()
    print(report.targets(found))
    if max(result.load_average) > server.cores() / 2:
        print(
            "note: the machine was busy (other processes competed with the bench): trust the "
            "ratios more than the absolute numbers"
        )
    path = options.out_dir / "sync.json"
    report.write_json(
        path,
        {
            "bench": "sync",
            "seconds": round(result.seconds, 1),
            "cores": server.cores(),
            "load_average": result.load_average,
            "jobs": JOBS,
            "places": result.places,
            "provinces": result.provinces,
            "body_bytes": result.body_bytes,
            "loops": [asdict(loop) for loop in result.loops],
            "runs": [asdict(run) for run in result.runs],
            "gets": {name: asdict(g) for name, g in result.gets.items()},
            "intake": result.intake,
            "archived_beforehand": result.archived_beforehand,
            "restored": result.restored,
            "commit_ms": result.commit_ms,
            "targets": found,
        },
    )
    print(f"\nresults: {path} ({result.seconds:.0f} s in all)")
    return all(t.passed for t in found)
