"""The upkeep bench (issue #4): `models.jobs.upkeep.expire` and `refresh` over the 1,000,000 seeded
jobs, each beside one hand-written UPDATE … WHERE of the same rows, in the same run.

Every timing is one transaction on a fresh connection (as a daily task would open): BEGIN and
`pg_backend_pid()` untimed, the statement timed, then ROLLBACK, so the seed is unchanged and
each run starts from the same rows. Between timings, untimed, `VACUUM jobs` removes the row
versions the rolled-back run left and CHECKPOINT writes out its dirty buffers, so no run pays
for the one before. The model runs through a SQLAlchemy session (engine without a pool, its
compiled-statement cache warm), the baseline through psycopg with the same server-side
parameters; the two alternate which goes first, after one untimed run of each.

The service date is chosen from the seed, whatever day the bench runs:
- expire: the day after the close date that the first 10% of active jobs reach, so ~10% of
  them (a week or so of closings, as after a stopped beat) are archived;
- refresh: the last day on which no active job is past its close date (the seed's own day:
  expire, which the refresh task runs first, would change nothing), so every active
  auto-refresh job of an unlimited-plan employer published 7+ days before is re-published.
Target: the model's median at most 1.5 × the hand-written statement's, the same rows changed.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from bench import report, seed, server
from bench.options import Options
from models.core.dates import REFRESH_DAYS
from models.db.engines import make_engine
from models.db.unit_of_work import make_sessionmaker
from models.jobs import upkeep

REPEATS = 5  # timed runs of each statement
EXPIRE_SHARE = 0.10  # of the active jobs
RATIO_TARGET = 1.5

# The hand-written baselines: what the model's statements mean, written once by hand. They set
# updated_at too, so that both leave the same rows in the same state.
EXPIRE_SQL = """UPDATE jobs SET status = 'archived', updated_at = %(now)s
WHERE status = 'active' AND close_date < %(today)s"""
REFRESH_SQL = """UPDATE jobs SET publish_date = %(today)s, updated_at = %(now)s
WHERE status = 'active' AND auto_refresh AND publish_date <= %(cutoff)s
  AND employer_id IN (SELECT id FROM employers WHERE plan = 'unlimited')"""

ModelTask = Callable[..., int]  # upkeep.expire / upkeep.refresh: (session, *, today) -> rows


@dataclass(frozen=True)
class Timing:
    seconds: float
    rows: int
    backend_cpu_ms: float  # the PostgreSQL backend that ran the statement
    client_cpu_ms: float  # the bench process (SQLAlchemy or psycopg, and the driver)


@dataclass
class Method:
    name: str
    statement: str
    timings: list[Timing] = field(default_factory=list)
    plan: str = ""  # EXPLAIN, text
    plan_shape: list[str] = field(default_factory=list)  # node types and indexes, top down

    def median(self) -> float:
        return statistics.median(t.seconds for t in self.timings)

    def median_cpu(self, which: str) -> float:
        return float(statistics.median(float(getattr(t, which)) for t in self.timings))


@dataclass
class Task:
    name: str
    today: date
    why: str  # how `today` was chosen, and what it selects
    model: Method
    hand: Method

    def ratio(self) -> float:
        return self.model.median() / self.hand.median()

    def rows(self) -> set[int]:
        return {t.rows for t in self.model.timings + self.hand.timings}


def run(options: Options) -> bool:
    started = time.perf_counter()
    seeded = seed.ensure(options)
    conninfo = seed.conninfo(seeded.url)
    engine = make_engine(seeded.url, poolclass=NullPool)  # a fresh connection per timing
    sessions = make_sessionmaker(engine)
    try:
        before = _fingerprint(conninfo)
        tasks = _tasks(conninfo)
        print(
            f"\nupkeep: {REPEATS} timed runs of each statement (alternating, after one "
            "untimed run each); BEGIN, statement, ROLLBACK; VACUUM jobs + CHECKPOINT between",
            flush=True,
        )
        for task in tasks:
            print(f"  {task.name}, today = {task.today}: {task.why}", flush=True)
            _measure(task, engine, sessions, conninfo)
        after = _fingerprint(conninfo)
    finally:
        engine.dispose()
    load = [round(x, 2) for x in os.getloadavg()]
    return _report(options, seeded, tasks, before == after, load, time.perf_counter() - started)


def _tasks(conninfo: str) -> list[Task]:
    """The two tasks and their service dates, read from the seed (see the module's text)."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT min(close_date), percentile_disc(%s) WITHIN GROUP (ORDER BY close_date), "
            "count(*) FROM jobs WHERE status = 'active'",
            (EXPIRE_SHARE,),
        ).fetchone()
        assert row is not None
        seed_day, share_day, active = row[0], row[1], int(row[2])
        expire_day = share_day + timedelta(days=1)
        expiring = _count(conn, "status = 'active' AND close_date < %s", expire_day)
        refresh_day = seed_day
        cutoff = refresh_day - timedelta(days=REFRESH_DAYS)
        auto = (
            "status = 'active' AND auto_refresh AND employer_id IN "
            "(SELECT id FROM employers WHERE plan = 'unlimited')"
        )
        refreshing = _count(conn, f"{auto} AND publish_date <= %s", cutoff)
        auto_jobs = _count(conn, auto, None)
        total = _count(conn, "true", None)
    return [
        Task(
            "expire",
            expire_day,
            f"{expiring:,} of {active:,} active jobs closed before it "
            f"({expiring / active:.1%}; {expiring / total:.1%} of all {total:,} jobs)",
            Method("models.jobs.upkeep.expire", ""),
            Method("hand-written UPDATE", EXPIRE_SQL),
        ),
        Task(
            "refresh",
            refresh_day,
            f"{refreshing:,} of {auto_jobs:,} active auto-refresh jobs of unlimited-plan "
            f"employers published on or before {cutoff} ({refreshing / total:.1%} of all jobs)",
            Method("models.jobs.upkeep.refresh", ""),
            Method("hand-written UPDATE", REFRESH_SQL),
        ),
    ]


def _count(conn: psycopg.Connection[tuple[Any, ...]], where: str, value: object) -> int:
    params = () if value is None else (value,)
    row = conn.execute(f"SELECT count(*) FROM jobs WHERE {where}", params).fetchone()
    return int(row[0]) if row else 0


def _fingerprint(conninfo: str) -> tuple[object, ...]:
    """Enough of the jobs table to see that no run was committed."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'active'), max(updated_at), "
            "sum(publish_date - DATE '2000-01-01') FROM jobs"
        ).fetchone()
    return tuple(row or ())


def _measure(task: Task, engine: Engine, sessions: sessionmaker[Session], conninfo: str) -> None:
    model_task: ModelTask = upkeep.expire if task.name == "expire" else upkeep.refresh
    params: dict[str, object] = {
        "today": task.today,
        "cutoff": task.today - timedelta(days=REFRESH_DAYS),
    }

    def model() -> Timing:
        return _time_model(sessions, model_task, task.today)

    def hand() -> Timing:
        return _time_hand(conninfo, task.hand.statement, params)

    with _captured(engine) as statements:  # the untimed first runs; the model's SQL kept
        _between(conninfo)
        model()
        _between(conninfo)
        hand()
    update = next(s for s in statements if s[0].lstrip().upper().startswith("UPDATE"))
    task.model.statement = update[0]
    task.model.plan, task.model.plan_shape = _explain(conninfo, update[0], update[1])
    hand_params = params | {"now": _utcnow_naive()}
    task.hand.plan, task.hand.plan_shape = _explain(conninfo, task.hand.statement, hand_params)
    for i in range(REPEATS):
        order = [(task.model, model), (task.hand, hand)]
        for method, timed in order if i % 2 == 0 else reversed(order):
            _between(conninfo)
            timing = timed()
            method.timings.append(timing)
            print(
                f"    {method.name:<24} {timing.seconds:7.3f} s  {timing.rows:,} rows  "
                f"backend {timing.backend_cpu_ms:6.0f} CPU ms",
                flush=True,
            )
    _between(conninfo)


def _utcnow_naive() -> datetime:
    """What the model binds for updated_at (UTC, stored without a zone)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _time_model(sessions: sessionmaker[Session], task: ModelTask, today: date) -> Timing:
    with sessions() as session:
        backend = int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())  # BEGIN
        backend_cpu, client_cpu = server.cpu_seconds(backend), time.process_time()
        started = time.perf_counter()
        rows = task(session, today=today)
        seconds = time.perf_counter() - started
        timing = Timing(
            seconds,
            rows,
            (server.cpu_seconds(backend) - backend_cpu) * 1000,
            (time.process_time() - client_cpu) * 1000,
        )
        session.rollback()
    return timing


def _time_hand(conninfo: str, sql: str, params: dict[str, object]) -> Timing:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()  # BEGIN
        assert row is not None
        backend = int(row[0])
        backend_cpu, client_cpu = server.cpu_seconds(backend), time.process_time()
        started = time.perf_counter()
        cursor = conn.execute(sql, params | {"now": _utcnow_naive()})
        rows = cursor.rowcount
        seconds = time.perf_counter() - started
        timing = Timing(
            seconds,
            rows,
            (server.cpu_seconds(backend) - backend_cpu) * 1000,
            (time.process_time() - client_cpu) * 1000,
        )
        conn.rollback()
    return timing


def _between(conninfo: str) -> None:
    """Untimed: the rolled-back row versions vacuumed, dirty buffers written out."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM jobs")
        conn.execute("CHECKPOINT")


@contextmanager
def _captured(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The statements (and parameters) the engine sends meanwhile."""
    found: list[tuple[str, Any]] = []

    def listen(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        found.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", listen)


def _explain(conninfo: str, sql: str, params: Any) -> tuple[str, list[str]]:
    """The plan of `sql` (not run): as text, and its nodes top down."""
    with psycopg.connect(conninfo) as conn:
        lines = [str(r[0]) for r in conn.execute(f"EXPLAIN {sql}", params).fetchall()]
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
        conn.rollback()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    shape: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        name = str(node["Node Type"])
        if "Index Name" in node:
            name += f" ({node['Index Name']})"
        elif "Relation Name" in node:
            name += f" ({node['Relation Name']})"
        shape.append(name)
        for child in node.get("Plans", []):
            walk(child)

    walk(document[0]["Plan"])
    return "\n".join(lines), shape


def _report(
    options: Options,
    seeded: seed.Seed,
    tasks: list[Task],
    unchanged: bool,
    load: list[float],
    seconds: float,
) -> bool:
    head = (
        "statement",
        "today",
        "rows",
        "median s",
        "min s",
        "max s",
        "× hand-written",
        "backend CPU ms",
        "client CPU ms",
    )
    body = []
    for task in tasks:
        for method in (task.model, task.hand):
            times = [t.seconds for t in method.timings]
            body.append(
                (
                    f"{task.name}: {method.name}",
                    str(task.today),
                    ", ".join(f"{r:,}" for r in sorted({t.rows for t in method.timings})),
                    f"{method.median():.3f}",
                    f"{min(times):.3f}",
                    f"{max(times):.3f}",
                    f"{task.ratio():.2f}" if method is task.model else "baseline",
                    f"{method.median_cpu('backend_cpu_ms'):.0f}",
                    f"{method.median_cpu('client_cpu_ms'):.1f}",
                )
            )
    targets = [
        report.Target(
            f"{task.name}: model ≤ {RATIO_TARGET} × the hand-written UPDATE, same rows",
            f"{task.model.median():.3f} s vs {task.hand.median():.3f} s = {task.ratio():.2f} ×, "
            + (
                f"{next(iter(task.rows())):,} rows each"
                if len(task.rows()) == 1
                else f"rows differ: {sorted(task.rows())}"
            ),
            task.ratio() <= RATIO_TARGET and len(task.rows()) == 1,
        )
        for task in tasks
    ]
    notes = []
    for task in tasks:
        same = task.model.plan_shape == task.hand.plan_shape
        notes.append(
            f"{task.name} plans: "
            + (
                f"the same, {' → '.join(task.model.plan_shape)}"
                if same
                else f"model {' → '.join(task.model.plan_shape)}; hand-written "
                f"{' → '.join(task.hand.plan_shape)}"
            )
        )
    if max(load) > server.cores() / 2:
        notes.append(
            f"the machine was busy (1-minute load average {load[0]:.1f} at the end, on "
            f"{server.cores()} cores): other processes competed with the bench, so trust the "
            "ratios and the backend CPU column more than the seconds"
        )
    if not unchanged:
        notes.append("the jobs table changed during the run: a timing was committed?!")
    s = seeded
    reused = f"reused (seeded in {s.seed_seconds:.0f} s)" if s.reused else "seeded now"
    print(
        f"\nupkeep bench: {s.jobs:,} jobs in {options.database}, {reused}; {REPEATS} timed runs "
        "each, medians\n"
    )
    print(report.grid(head, body))
    print(
        "(backend CPU: the PostgreSQL backend's CPU time during the statement; client CPU: the "
        "bench process's. Both hardly move when other processes compete for the cores.)"
    )
    for task in tasks:
        print(f"{task.name}, today = {task.today}: {task.why}")
    print()
    print(report.targets(targets))
    for note in notes:
        print(f"note: {note}")
    print(f"seed unchanged after the run: {'yes' if unchanged else 'NO'}")
    out = options.out_dir
    plans_path = out / "upkeep-plans.txt"
    plans_path.parent.mkdir(parents=True, exist_ok=True)
    plans_path.write_text(
        "\n".join(
            f"-- {task.name}: {method.name}\n{method.statement}\n{method.plan}\n"
            for task in tasks
            for method in (task.model, task.hand)
        )
    )
    path = out / "upkeep.json"
    report.write_json(
        path,
        {
            "bench": "upkeep",
            "seconds": round(seconds, 1),
            "cores": server.cores(),
            "load_average_end": load,
            "seed": asdict(seeded),
            "repeats": REPEATS,
            "tasks": [
                {
                    "name": task.name,
                    "today": task.today,
                    "why": task.why,
                    "ratio": task.ratio(),
                    "methods": [
                        asdict(method) | {"median_s": method.median()}
                        for method in (task.model, task.hand)
                    ],
                }
                for task in tasks
            ],
            "targets": targets,
            "notes": notes,
            "seed_unchanged": unchanged,
        },
    )
    print(f"\nresults: {path}; plans: {plans_path} ({seconds:.0f} s in all)")
    return all(t.passed for t in targets) and unchanged
