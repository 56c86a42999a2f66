"""The feeds bench (C15): `GET /feeds/indeed.xml` over the seeded million, streamed by ONE
`jobpost serve` worker, read by the bench as it comes: the time to the first byte and to the
last, the jobs and bytes the feed held, and the worker's resident memory before and at its
peak (VmHWM, which no sampling can miss). Then what a revalidation (a 304) costs: the feeds'
stamp statement (`models.jobs.feeds.open_stamp`), timed on its own (the seed stamps today's
jobs at noon UTC, so before noon the feed is not settled and answers no 304).

Targets: every open job in the feed once; the worker's peak under the api bench's bound
(`api.WORKER_RSS`, 100 MB) and its growth while streaming under `GROWTH` (20 MB), whatever the
feed's size: the body is never held whole.
"""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import text

from bench import api, report, seed, server
from bench.memory import high_water_bytes
from bench.options import Options
from models.db.engines import make_engine
from models.jobs import feeds

PATH = "/feeds/indeed.xml"
GROWTH = 20_000_000  # bytes the worker may grow by while streaming
READ = 1 << 16  # bytes the bench reads at a time
REVALIDATIONS = 20


@dataclass
class Run:
    open_jobs: int = 0  # active and not taken down, by the database
    jobs: int = 0  # <job> elements the feed held
    bytes: int = 0
    first_byte_s: float = 0.0
    seconds: float = 0.0
    rss_before: int = 0
    peak: int = 0  # VmHWM after the feed
    stamp_ms: float = 0.0  # median of the stamp statement
    seconds_total: float = 0.0


def run(options: Options) -> bool:
    started = time.perf_counter()
    seeded = seed.ensure(options)
    result = Run(open_jobs=_open_jobs(seeded.url), stamp_ms=_stamp_ms(seeded.url))
    out = options.out_dir
    with server.gunicorn(seeded.url, 1, out / "feeds-server.log") as srv:
        [pid] = srv.worker_pids()
        _get(srv.base_url, "/robots.txt")  # the worker's imports and first connection
        result.rss_before = srv.rss_bytes()[pid]
        _stream(srv.base_url, result)
        result.peak = high_water_bytes(pid) or 0
    result.seconds_total = time.perf_counter() - started
    return _report(options, result)


def _open_jobs(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            sql = "SELECT count(*) FROM jobs WHERE status = 'active' AND NOT taken_down"
            return int(conn.scalar(text(sql)) or 0)
    finally:
        engine.dispose()


def _stamp_ms(url: str) -> float:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            feeds.open_stamp(conn)  # warm
            times = []
            for _ in range(REVALIDATIONS):
                began = time.perf_counter()
                feeds.open_stamp(conn)
                times.append(time.perf_counter() - began)
            return sorted(times)[len(times) // 2] * 1000
    finally:
        engine.dispose()


def _connection(base_url: str) -> http.client.HTTPConnection:
    parts = urlsplit(base_url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=600)


def _get(base_url: str, path: str, headers: dict[str, str] | None = None) -> int:
    conn = _connection(base_url)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        answer.read()
        return answer.status
    finally:
        conn.close()


def _stream(base_url: str, result: Run) -> None:
    """Read the feed as it comes, counting its jobs."""
    conn = _connection(base_url)
    try:
        began = time.perf_counter()
        conn.request("GET", PATH)
        answer = conn.getresponse()
        if answer.status != 200:
            raise RuntimeError(f"GET {PATH}: {answer.status} {answer.read()[:300]!r}")
        tail = b""
        while chunk := answer.read(READ):
            if not result.bytes:
                result.first_byte_s = time.perf_counter() - began
            result.bytes += len(chunk)
            joined = tail + chunk
            result.jobs += joined.count(b"</job>")
            tail = joined[-5:]  # a `</job>` split across two reads is counted once
        result.seconds = time.perf_counter() - began
    finally:
        conn.close()


def _report(options: Options, r: Run) -> bool:
    growth = r.peak - r.rss_before
    mb = 1e6
    print(f"\nfeeds: {PATH} over the seeded database, one worker ({r.seconds_total:.0f} s)")
    head = ("scenario", "jobs", "MB", "first byte s", "seconds", "jobs/s", "RSS MB", "peak MB")
    body = [
        (
            "indeed feed, streamed",
            f"{r.jobs:,}",
            f"{r.bytes / mb:,.1f}",
            f"{r.first_byte_s:.2f}",
            f"{r.seconds:.1f}",
            f"{r.jobs / r.seconds:,.0f}" if r.seconds else "-",
            f"{r.rss_before / mb:.1f}",
            f"{r.peak / mb:.1f}",
        )
    ]
    print(report.grid(head, body))
    print(f"the stamp a 304 costs, median of {REVALIDATIONS}: {r.stamp_ms:.1f} ms")
    targets = [
        report.Target(
            "every open job in the feed once",
            f"{r.jobs:,} of {r.open_jobs:,}",
            r.jobs == r.open_jobs,
        ),
        report.Target(
            f"the worker's peak < {api.WORKER_RSS / mb:.0f} MB resident",
            f"{r.peak / mb:.1f} MB",
            0 < r.peak < api.WORKER_RSS,
        ),
        report.Target(
            f"its growth while streaming < {GROWTH / mb:.0f} MB",
            f"{growth / mb:.1f} MB",
            growth < GROWTH,
        ),
    ]
    print(report.targets(targets))
    report.write_json(
        options.out_dir / "feeds.json",
        {"run": r, "growth_bytes": growth, "targets": targets},
    )
    return all(t.passed for t in targets)
