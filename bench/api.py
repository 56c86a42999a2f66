"""The API bench (issue #2): the v1.1 job API under gunicorn against 1,000,000 jobs.

Every scenario is driven by wrk for the same time and compared with `GET /healthz` of the same
server in the same run (measured first and last; the baseline is their mean), so the ratios
say what the application costs over a request that touches nothing, whatever the machine.
Targets: GET one job at least half the /healthz rate, and 0.3 of it read afresh every time (a
second server, JOB_CACHE_MB=0); POST and PUT by referenceId of realistic bodies at least 0.2
of it, with at most 3 ms of web-process CPU each (issue 15); the list of the 200,000-job
employer (page 1, `status=active`, `q` with a word in 1% of its titles) at least 0.3 of it,
each with a p99 under 50 ms (issue 15); the public job page in English and in French each at
least 0.4 of it (issue 18); every gunicorn worker under 100 MB resident after the load.
Beside PUT by referenceId, its floor: the same writes' statements replayed by a bare handler
(`bench.floor`), the most any change to the app's Python could reach.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from bench import bodies, floor, plans, report, seed, server, wrk
from bench.http import Client, Response
from bench.options import Options
from models.core.dates import today_in
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Employer
from models.jobs import listing as job_listing
from models.jobs import tallies

API = "/api/v1.1"
HEALTHZ = "GET /healthz"
GET_ONE_JOBS = 1000  # GET one job cycles through this many of the big employer's jobs
# Long enough for each worker to have served (and kept, api.cache) nearly every sampled job:
# docs/benchmarks.md, GET one job's warm-up.
GET_ONE_WARMUP = 6
PUT_JOBS = 200  # PUT by referenceId writes these jobs, as real jobs (bench.bodies)
POST_BODIES = 20
LIST_PAGE = 500

GET_ONE_RATIO = 0.5  # GET one job: at least 50% of the /healthz rate
UNCACHED_RATIO = 0.3  # GET one job read afresh each time (JOB_CACHE_MB=0)
WRITE_RATIO = 0.2  # POST, PUT by referenceId
WRITE_CPU_MS = 3.0  # web-process CPU per write
UNCACHED = "GET one job, uncached"
FRESH = "none kept"  # the search page scenarios' suffix on the server that keeps none
PUT = "PUT by referenceId"
FLOOR = "PUT, its statements alone"  # bench.floor
POST = "POST"
PLACES = 40  # the most populous listed places, which the written bodies name
LIST_RATIO = 0.3  # the big employer's lists: at least 30% of the /healthz rate
LIST_P99_MS = 50.0  # and p99 under 50 ms
# Where issue #15 found them (× /healthz; 200,000 jobs of one employer, 2026-11-25).
LIST_BEFORE = {"page 1": 0.01, "status=active": 0.04, "q": 0.01}
WORKER_RSS = 100_000_000  # each worker under 100 MB resident
PAGE_RATIO = 0.4  # the public job page (C13), in English and in French
PAGE_JOBS = 100  # the job page cycles through this many active jobs, in each language
PAGES = {"en": "GET job page, English", "fr": "GET job page, French"}
SEARCH_RATIO = 0.3  # the public search page (C17), over every open job of the million
SEARCH_P99_MS = 50.0
SEARCH_PROVINCE = "ON"
SEARCH_CATEGORY = 12


@dataclass(frozen=True)
class Scenario:
    name: str
    requests: list[wrk.Request]
    auth: bool = True
    expect: int = 200
    check: Callable[[Response], str | None] | None = None  # what is wrong with an answer
    connections: int | None = None  # instead of the run's (wrk needs one per thread at least)
    warmup: int = 0  # seconds of warm-up at least, whatever the run's
    uncached: bool = False  # against the server that keeps no job representations
    floor: bool = False  # against the bare replay of PUT's statements (bench.floor)


@dataclass(frozen=True)
class Measured:
    scenario: str
    first_status: int  # of one request sent before the load
    result: wrk.Result
    worker_cpu_ms: float  # gunicorn workers' CPU time per request during the load
    db_cpu_ms: float  # PostgreSQL's CPU time per request, in the bench database's backends


@dataclass
class Run:
    """Everything one run of the bench found, for the report."""

    seed: seed.Seed
    workers: int
    measured: list[Measured] = field(default_factory=list)
    worker_rss: dict[int, int] = field(default_factory=dict)
    master_rss: int | None = None
    plans: dict[str, list[plans.Plan]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    load_average: list[float] = field(default_factory=list)  # 1-minute, before and after
    commit_ms: float = 0.0  # a durable commit of the bench database, median
    floor_statements: list[str] = field(default_factory=list)  # one PUT's, as captured
    bench_jobs_removed: int = 0
    seconds: float = 0.0


def run(options: Options) -> bool:
    """Seed (or reuse), serve, load every scenario, report; True when every target passed."""
    started = time.perf_counter()
    wrk_path = wrk.ensure_installed()
    seeded = seed.ensure(options)
    key = seed.issue_key(seeded, seeded.big_employer_id)
    result = Run(seeded, server.cores(), load_average=[os.getloadavg()[0]])
    result.commit_ms = _commit_ms(seeded.url)
    out = options.out_dir
    try:
        with (
            contextlib.ExitStack() as stack,
            server.gunicorn(seeded.url, result.workers, out / "api-server.log") as srv,
            server.gunicorn(
                seeded.url,
                result.workers,
                out / "api-server-uncached.log",
                {"JOB_CACHE_MB": "0", "SEARCH_PAGE_SECONDS": "0"},
            ) as uncached,
        ):
            healthz = Scenario(HEALTHZ, [wrk.Request("GET", "/healthz")], auth=False)
            scenarios = [healthz, *_scenarios(seeded, Client(srv.base_url, key), result.workers)]
            scenarios.append(replace(healthz, name=f"{HEALTHZ} (again)"))
            put = next(s for s in scenarios if s.name == PUT)
            sent = [r.body or "" for r in put.requests]
            writes = floor.capture(seeded.url, key, sent, f"{API}/jobs")
            result.floor_statements = [sql for sql, _values in writes[0].statements]
            scenarios.insert(
                scenarios.index(put) + 1,
                Scenario(FLOOR, [wrk.Request("PUT", floor.PATH, b) for b in sent], floor=True),
            )
            bare = stack.enter_context(
                floor.serving(seeded.url, writes, result.workers, out / "api-floor.log")
            )
            print(
                f"\nload: wrk -t{options.threads} -c{options.connections}, {options.warmup} s "
                f"warm-up (GET one job, job pages {max(options.warmup, GET_ONE_WARMUP)} s) + "
                f"{options.duration} s per scenario; gunicorn, {result.workers} sync workers "
                f'("{UNCACHED}" and the search pages "{FRESH}": a second server with '
                "JOB_CACHE_MB=0 and SEARCH_PAGE_SECONDS=0)",
                flush=True,
            )
            for scenario in scenarios:
                target = bare if scenario.floor else uncached if scenario.uncached else srv
                result.measured.append(_measure(options, wrk_path, target, key, scenario, result))
            result.worker_rss = srv.rss_bytes() | uncached.rss_bytes()
            result.master_rss = srv.master_rss_bytes()
        result.load_average.append(os.getloadavg()[0])
        result.plans = _explain(seeded)
    finally:
        result.bench_jobs_removed = seed.remove_bench_rows(seeded, key)
    result.seconds = time.perf_counter() - started
    return _report(options, result)


def _scenarios(seeded: seed.Seed, client: Client, workers: int) -> list[Scenario]:
    """The measured scenarios, with fixtures read from the bench database and the API."""
    today = today_in(Settings.from_env().timezone)
    rng = random.Random(seed.RANDOM_SEED)
    engine = make_engine(seeded.url)
    big = {"e": seeded.big_employer_id, "m": seeded.max_job_id}
    try:
        with engine.connect() as conn:
            # md5 order: a fixed, well spread sample, the same on every run.
            ids = conn.scalars(
                text(
                    "SELECT id FROM jobs WHERE employer_id = :e AND id <= :m "
                    "ORDER BY md5(id::text) LIMIT :n"
                ),
                big | {"n": GET_ONE_JOBS},
            ).all()
            # Open jobs an ATS would sync (a past closeDate could not be written back), none
            # holding the word, so that it stays in exactly 1% of titles whatever a PUT does.
            put_ids = conn.scalars(
                text(
                    "SELECT id FROM jobs WHERE employer_id = :e AND id <= :m "
                    "AND status = 'active' AND close_date > :today AND reference_id IS NOT NULL "
                    "AND search_text NOT LIKE :w ORDER BY md5(id::text) LIMIT :n"
                ),
                big | {"today": today, "w": f"%{seeded.word.casefold()}%", "n": PUT_JOBS},
            ).all()
            places = [
                {"id": i, "description": d}
                for i, d in conn.execute(
                    text(
                        "SELECT id, description FROM locations WHERE listed AND type = 'City' "
                        "ORDER BY population DESC, id LIMIT :n"
                    ),
                    {"n": PLACES},
                )
            ]
            active = conn.scalar(
                text("SELECT count(*) FROM jobs WHERE employer_id = :e AND status = 'active'"),
                big,
            )
            page_ids = conn.scalars(
                text(
                    "SELECT id FROM jobs WHERE employer_id = :e AND id <= :m "
                    "AND status = 'active' ORDER BY md5(id::text) LIMIT :n"
                ),
                big | {"n": PAGE_JOBS},
            ).all()
    finally:
        engine.dispose()
    # A client writes back what it reads (the write shape is the read shape, C4), less what the
    # service assigns, with what a real job holds: a long description, places, a salary. Each
    # job has two such versions, sent in turn, so that every PUT changes its job.
    read = [_get_json(client, f"{API}/jobs/{job_id}") for job_id in put_ids]
    put_bodies = [
        bodies.realistic(_without(job, "id", "publishDate", "employer"), rng, places)
        for _version in range(2)
        for job in read
    ]
    post_bodies = [_without(body, "referenceId") for body in put_bodies[:POST_BODIES]]
    word = seeded.word.lower()

    def total_of(jobs: int, what: str) -> Callable[[Response], str | None]:
        """A check that the list's total is the jobs counted in the database (C6: exact)."""

        def check(answer: Response) -> str | None:
            total = answer.json()["paging"]["total"]
            return None if total == jobs else f"{what}: total {total}, the database has {jobs}"

        return check

    def full_page(answer: Response) -> str | None:
        count = len(answer.json()["data"])
        return None if count == 10 else f"page {LIST_PAGE} holds {count} jobs, not 10"

    list_q = Scenario(
        f"GET list, q={word}",
        [wrk.Request("GET", f"{API}/jobs?q={word}")],
        check=total_of(seeded.word_jobs_big, f"q={word}"),
    )
    get_one = Scenario(
        "GET one job", [wrk.Request("GET", f"{API}/jobs/{i}") for i in ids], warmup=GET_ONE_WARMUP
    )
    return [
        get_one,
        replace(get_one, name=UNCACHED, warmup=0, uncached=True),
        Scenario(
            "GET list, page 1",
            [wrk.Request("GET", f"{API}/jobs")],
            check=total_of(seeded.big_employer_jobs, "page 1"),
        ),
        Scenario(
            "GET list, status=active",
            [wrk.Request("GET", f"{API}/jobs?status=active")],
            check=total_of(active, "status=active"),
        ),
        list_q,
        # The same with one connection per worker: its latency is the service time alone,
        # where the line above also holds the time a request waits for a free worker.
        replace(list_q, name=f"{list_q.name}, -c{workers}", connections=workers),
        Scenario(
            f"GET list, page {LIST_PAGE}",
            [wrk.Request("GET", f"{API}/jobs?page={LIST_PAGE}")],
            check=full_page,
        ),
        Scenario(PUT, [wrk.Request("PUT", f"{API}/jobs", json.dumps(b)) for b in put_bodies]),
        Scenario(
            POST,
            [wrk.Request("POST", f"{API}/jobs", json.dumps(b)) for b in post_bodies],
            expect=201,
        ),
        # The public page (C8, C13), rendered from its templates in each language in turn.
        *(
            Scenario(
                name,
                [wrk.Request("GET", f"/jobs/{i}?lang={code}") for i in page_ids],
                auth=False,
                check=_in_language(code),
                # Each worker keeps the pages it rendered (api.pages): as for GET one job,
                # measured once most are kept (docs/benchmarks.md).
                warmup=GET_ONE_WARMUP,
            )
            for code, name in PAGES.items()
        ),
        *(
            Scenario(name, [wrk.Request("GET", path)], auth=False, check=_results)
            for name, path in _searches(word).items()
        ),
        # The same read and rendered afresh each time (no target): what a search that no
        # worker kept costs.
        *(
            Scenario(
                f"{name}, {FRESH}",
                [wrk.Request("GET", path)],
                auth=False,
                check=_results,
                uncached=True,
            )
            for name, path in _searches(word).items()
        ),
    ]


def _searches(word: str) -> dict[str, str]:
    """The search page's scenarios (C17): a common word, a province alone, and a category
    with a province, over the open jobs of every employer."""
    province, category = SEARCH_PROVINCE, SEARCH_CATEGORY
    return {
        f"GET search page, q={word}": f"/jobs?q={word}",
        f"GET search page, province={province}": f"/jobs?province={province}",
        f"GET search page, category={category}&province={province}": (
            f"/jobs?category={category}&province={province}"
        ),
    }


def _results(answer: Response) -> str | None:
    """A check that the search page shows a full page of results."""
    found = answer.body.count(b'<li>\n<h3><a href="/jobs/')
    return None if found == 20 else f"the search page shows {found} results, not 20"


def _in_language(code: str) -> Callable[[Response], str | None]:
    """A check that the page is in the language asked for."""

    def check(answer: Response) -> str | None:
        tag = f'<html lang="{code}-CA">'.encode()
        return None if tag in answer.body else f"the page has no {tag!r}"

    return check


COMMITS = 31


def _commit_ms(url: str) -> float:
    """How long a durable commit of the bench database takes (the median of COMMITS, each
    of a one-row update): the disk's flush, which a write waits for whatever it costs."""
    engine = make_engine(url)
    spent = []
    try:
        with engine.connect() as conn:
            for _ in range(COMMITS):
                started = time.perf_counter()
                conn.execute(text(f"UPDATE {seed.MARKER} SET seconds = seconds"))
                conn.commit()
                spent.append(time.perf_counter() - started)
    finally:
        engine.dispose()
    return sorted(spent)[COMMITS // 2] * 1000


def _get_json(client: Client, path: str) -> dict[str, Any]:
    answer = client.request("GET", path)
    if answer.status != 200:
        raise RuntimeError(f"GET {path}: {answer.status} {answer.body[:300]!r}")
    body: dict[str, Any] = answer.json()
    return body


def _without(body: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in names}


def _measure(
    options: Options, wrk_path: str, srv: server.Server, key: str, scenario: Scenario, run: Run
) -> Measured:
    """Check one answer, warm up, then load the scenario for the measured duration."""
    first = scenario.requests[0]
    client = Client(srv.base_url, key)
    answer = client.request(first.method, first.path, first.body, auth=scenario.auth)
    if scenario.name.startswith(HEALTHZ) and answer.status == 404:
        note = (
            "GET /healthz answers 404 (not there yet): measured the router's 404 instead, "
            "the same cheap path that touches nothing"
        )
        if note not in run.notes:
            run.notes.append(note)
    elif answer.status != scenario.expect:
        raise RuntimeError(
            f"{scenario.name}: {first.method} {first.path} answered {answer.status}, "
            f"not {scenario.expect}: {answer.body[:500]!r}"
        )
    elif scenario.check and (problem := scenario.check(answer)):
        raise RuntimeError(f"{scenario.name}: {problem}")
    slug = re.sub(r"[^a-z0-9]+", "-", scenario.name.lower()).strip("-")
    script = options.out_dir / "wrk" / f"{slug}.lua"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(wrk.script(scenario.requests, {"API-Key": key} if scenario.auth else {}))
    connections = scenario.connections or options.connections
    threads = min(options.threads, connections)

    def load(seconds: int) -> wrk.Result:
        return wrk.run(
            wrk_path,
            srv.base_url,
            script,
            threads=threads,
            connections=connections,
            seconds=seconds,
        )

    if warmup := max(options.warmup, scenario.warmup):
        load(warmup)  # connections, prepared statements, caches; not kept
    cpu, db_cpu = srv.cpu_seconds(), _backends_cpu(run.seed.url)
    result = load(options.duration)
    cpu_ms = (srv.cpu_seconds() - cpu) * 1000 / max(result.requests, 1)
    db_after = _backends_cpu(run.seed.url)
    db_seconds = sum(s - db_cpu.get(pid, 0.0) for pid, s in db_after.items())
    db_cpu_ms = db_seconds * 1000 / max(result.requests, 1)
    print(
        f"  {scenario.name:<28} {result.rps:7,.0f} req/s  p50 {result.p50_ms:7.2f} ms  "
        f"p99 {result.p99_ms:7.2f} ms  {cpu_ms:5.2f} CPU ms/req  {db_cpu_ms:5.2f} DB CPU ms/req  "
        f"{_statuses(result)}",
        flush=True,
    )
    return Measured(scenario.name, answer.status, result, cpu_ms, db_cpu_ms)


def _backends_cpu(url: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to the bench database (the server
    runs on this machine: the bench reads /proc, as for the workers), this one's excepted."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            pids = conn.scalars(
                text(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).all()
    finally:
        engine.dispose()
    return {pid: server.cpu_seconds(pid) for pid in pids}


def _statuses(result: wrk.Result) -> str:
    counts = [f"{n:,} × {status}" for status, n in sorted(result.statuses.items())]
    errors = sum(result.socket_errors.values())
    return ", ".join(counts + ([f"{errors:,} socket errors"] if errors else []))


def _explain(seeded: seed.Seed) -> dict[str, list[plans.Plan]]:
    """The plans of the statements `models.jobs.writes.listing` runs for each list scenario. A
    search is run twice, as a web process runs it: first with no total kept, then with the
    total the first counted."""

    def listing(
        q: str | None, page: int, status: str | None = None, runs: int = 1
    ) -> Callable[[Session, Employer], object]:
        def call(session: Session, employer: Employer) -> None:
            totals = tallies.SearchTotals()
            for _ in range(runs):
                job_listing.listing(
                    session.connection(),
                    employer.id,
                    q=q,
                    status=status,
                    page=page,
                    page_size=10,
                    totals=totals,
                )

        return call

    word = seeded.word.lower()
    calls = {
        f"GET list, q={word}": listing(word, 1, runs=2),
        "GET list, page 1": listing(None, 1),
        "GET list, status=active": listing(None, 1, "active"),
        f"GET list, page {LIST_PAGE}": listing(None, LIST_PAGE),
    }
    return {
        name: plans.explain(seeded.url, seeded.big_employer_id, call)
        for name, call in calls.items()
    }


def _report(options: Options, run: Run) -> bool:
    healthz = [m for m in run.measured if m.scenario.startswith(HEALTHZ)]
    baseline = sum(m.result.rps for m in healthz) / len(healthz)
    rows = []
    for m in run.measured:
        r = m.result
        failed = sum(r.socket_errors.values())
        if not (m in healthz and m.first_status == 404):  # those 404s are the measured path
            failed += r.non_2xx
        ratio = None if m in healthz else r.rps / baseline
        rows.append(
            report.Row(
                m.scenario, r.rps, r.p50_ms, r.p99_ms, ratio, m.worker_cpu_ms, failed, m.db_cpu_ms
            )
        )
    by_name = {row.scenario: row for row in rows}
    lists = [
        by_name[name]
        for name in (
            "GET list, page 1",
            "GET list, status=active",
            f"GET list, q={run.seed.word.lower()}",
        )
    ]
    rss_mb = [b / 1e6 for _pid, b in sorted(run.worker_rss.items())]
    targets = [
        _rate_target(by_name["GET one job"], GET_ONE_RATIO, baseline),
        _rate_target(by_name[UNCACHED], UNCACHED_RATIO, baseline),
        *(_write_target(by_name[name], baseline) for name in (POST, PUT)),
        *(_rate_target(by_name[name], PAGE_RATIO, baseline) for name in PAGES.values()),
        *(_search_target(by_name[name], baseline) for name in _searches(run.seed.word.lower())),
        *(
            _list_target(row, run.seed.big_employer_jobs, baseline, LIST_BEFORE[before])
            for row, before in zip(lists, LIST_BEFORE, strict=True)
        ),
        report.Target(
            f"each gunicorn worker < {WORKER_RSS / 1e6:.0f} MB resident",
            ", ".join(f"{mb:.1f} MB" for mb in rss_mb) or "no worker found",
            bool(rss_mb) and max(run.worker_rss.values()) < WORKER_RSS,
        ),
    ]
    if max(run.load_average) > run.workers / 2:
        run.notes.append(
            f"the machine was busy (1-minute load average {run.load_average[0]:.1f} before, "
            f"{run.load_average[1]:.1f} after, on {server.cores()} cores): other processes "
            "competed with the bench, so trust the ratios more than the absolute numbers"
        )
    s = run.seed
    seeded = (
        f"reused (seeded in {s.seed_seconds:.0f} s)" if s.reused else f"seeded in {s.seconds:.0f} s"
    )
    print(
        f"\napi bench: {s.jobs:,} jobs, {s.big_employer_jobs:,} of one employer "
        f"({s.word_jobs_big:,} of them with {s.word!r} in the title); database {seeded}; "
        f"gunicorn {run.workers} workers; wrk -t{options.threads} -c{options.connections} "
        f"-d{options.duration}s\n"
    )
    print(report.table(rows, "/healthz"))
    print(
        "(CPU ms/req: the gunicorn workers' CPU time per request; DB CPU ms/req: the PostgreSQL "
        "backends' serving them; unlike req/s they hardly move when other processes compete "
        "for the cores)"
    )
    print(
        f"\n/healthz baseline: {baseline:,.0f} req/s, mean of "
        f"{' and '.join(f'{m.result.rps:,.0f}' for m in healthz)} (first and last)"
    )
    print(report.targets(targets))
    ceiling = run.workers / run.commit_ms * 1000
    print(
        f"a durable commit of the bench database: {run.commit_ms:.1f} ms (median of {COMMITS}); "
        f"each sync worker waits for one per write, so writes cannot pass {ceiling:,.0f} req/s "
        f"= {ceiling / baseline:.0%} of /healthz here"
    )
    bare, put = by_name[FLOOR], by_name[PUT]
    print(
        f"the floor of a write: PUT by referenceId's {len(run.floor_statements)} statements "
        f"replayed by a bare handler (bench.floor), {bare.rps:,.0f} req/s "
        f"= {bare.ratio or 0:.0%} of /healthz at {bare.cpu_ms:.2f} CPU ms; the app's PUT "
        f"reaches {put.rps / bare.rps:.0%} of it"
    )
    print(
        f"worker RSS after the load: {', '.join(f'{mb:.1f} MB' for mb in rss_mb)} "
        f"(master {(run.master_rss or 0) / 1e6:.1f} MB)"
    )
    for note in run.notes:
        print(f"note: {note}")
    print("\nplans of models.jobs.writes.listing for the big employer, first execution → warm:")
    for scenario, statements in run.plans.items():
        steps = ", ".join(
            f"{_describe(p.statement)} {p.first_ms:.1f} → {p.warm_ms:.1f} ms"
            + (" (generic plan)" if p.generic else "")
            for p in statements
        )
        print(f"  {scenario}: {steps}")
    out = options.out_dir
    plans_path = out / "api-plans.txt"
    plans_path.write_text(_plans_text(run.plans))
    report.write_json(
        out / "api.json",
        {
            "bench": "api",
            "seconds": round(run.seconds, 1),
            "cores": server.cores(),
            "load_average": run.load_average,
            "commit_ms": run.commit_ms,
            "floor_statements": run.floor_statements,
            "seed": asdict(s),
            "server": {
                "workers": run.workers,
                "worker_rss_bytes": run.worker_rss,
                "master_rss_bytes": run.master_rss,
            },
            "wrk": {
                "threads": options.threads,
                "connections": options.connections,
                "duration_s": options.duration,
                "warmup_s": options.warmup,
            },
            "baseline_rps": baseline,
            "scenarios": [
                asdict(row) | {"first_status": m.first_status, "wrk": m.result}
                for row, m in zip(rows, run.measured, strict=True)
            ],
            "targets": targets,
            "notes": run.notes,
            "bench_jobs_removed": run.bench_jobs_removed,
            "plans": {
                name: [asdict(p) | {"generic": p.generic} for p in statements]
                for name, statements in run.plans.items()
            },
        },
    )
    print(f"\nresults: {out / 'api.json'}; plans: {plans_path} ({run.seconds:.0f} s in all)")
    return all(t.passed for t in targets)


def _rate_target(row: report.Row, ratio: float, baseline: float) -> report.Target:
    return report.Target(
        f"{row.scenario} ≥ {ratio:.0%} of the /healthz rate",
        f"{row.rps:,.0f} req/s = {row.ratio or 0:.0%} of {baseline:,.0f}",
        (row.ratio or 0) >= ratio,
    )


def _write_target(row: report.Row, baseline: float) -> report.Target:
    """A write: its rate against /healthz, and the web process's CPU for each."""
    return report.Target(
        f"{row.scenario} ≥ {WRITE_RATIO:.0%} of the /healthz rate, ≤ {WRITE_CPU_MS:.0f} CPU ms/req",
        f"{row.rps:,.0f} req/s = {row.ratio or 0:.0%} of {baseline:,.0f}, {row.cpu_ms:.2f} CPU ms",
        (row.ratio or 0) >= WRITE_RATIO and row.cpu_ms <= WRITE_CPU_MS,
    )


def _plans_text(explained: dict[str, list[plans.Plan]]) -> str:
    parts = []
    for scenario, statements in explained.items():
        for i, p in enumerate(statements, 1):
            parts.append(
                f"-- {scenario}, statement {i} ({_describe(p.statement)})\n{p.statement}\n"
                f"-- parameters: {p.parameters}\n"
                f"-- first execution, {p.first_ms:.1f} ms:\n{p.first_plan}\n"
                f"-- execution {plans.RUNS} (warm{', generic plan' if p.generic else ''}), "
                f"{p.warm_ms:.1f} ms:\n{p.warm_plan}\n"
            )
    return "\n".join(parts)


def _describe(statement: str) -> str:
    """A short name for a captured statement of the list: a search's count, its page read
    by walking the employer's jobs, or by reading every match (with their count), or a
    page without search (all with the employer's tally)."""
    sql = statement.lower()
    if "over ()" in sql:
        return "matches, counted"
    if " walked" in sql:
        return "walk"
    if "count(*)" in sql:
        return "count"
    return "page"


def _search_target(row: report.Row, baseline: float) -> report.Target:
    """A search page (C17): its rate against /healthz and its p99."""
    return report.Target(
        f"{row.scenario.removeprefix('GET ')} ≥ {SEARCH_RATIO:.0%} of the /healthz rate, "
        f"p99 < {SEARCH_P99_MS:.0f} ms",
        f"{row.rps:,.0f} req/s = {row.ratio or 0:.0%} of {baseline:,.0f}, p99 {row.p99_ms:.1f} "
        f"ms; CPU ms/req {row.cpu_ms:.2f} web, {row.db_cpu_ms or 0:.2f} database",
        (row.ratio or 0) >= SEARCH_RATIO and row.p99_ms < SEARCH_P99_MS,
    )


def _list_target(row: report.Row, jobs: int, baseline: float, before: float) -> report.Target:
    """A list of the big employer: its rate against /healthz and its p99, with the CPU it
    took and where issue 15 found it."""
    return report.Target(
        f"{row.scenario.removeprefix('GET list, ')} on the {jobs:,}-job employer "
        f"≥ {LIST_RATIO:.0%} of the /healthz rate, p99 < {LIST_P99_MS:.0f} ms",
        f"{row.rps:,.0f} req/s = {row.ratio or 0:.0%} of {baseline:,.0f}, p99 {row.p99_ms:.1f} "
        f"ms; CPU ms/req {row.cpu_ms:.2f} web, {row.db_cpu_ms or 0:.2f} database; issue 15 "
        f"found {before:.2f} × /healthz",
        (row.ratio or 0) >= LIST_RATIO and row.p99_ms < LIST_P99_MS,
    )
