"""The pieces of the sync bench (bench/sync.py, issue 16) that `make bench` stands on: the jobs
it sends are distinct and valid, the two loads send what they say, the memory sampler sees a
process grow, the seed's jobs are put back as they were, and the targets follow the figures.
Nothing here is timed: speed is for `make bench`."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bench import loads, memory, seed, server, sync, sync_data
from bench.options import Options
from models import employers
from models.db.engines import make_engine
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.jobs import writes as jobs
from tests import factories
from tests.conftest import Account, Api
from tests.harness import JOBPOST, Program
from tests.services import scratch_postgres

JOBS = "/api/v1.1/jobs"


@pytest.fixture(scope="module")
def bodies(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The bench's 10,000 jobs over the places of a freshly migrated SQLite database."""
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('places') / 'jobpost.db'}")
    try:
        upgrade(engine)
        with engine.connect() as conn:
            pool = sync_data.places(conn)
    finally:
        engine.dispose()
    return sync_data.jobs(pool)


def words(html: str) -> int:
    return len(re.sub(r"<[^>]+>", " ", html).split())


def test_the_jobs_are_distinct_and_realistic(bodies: list[dict[str, Any]]) -> None:
    assert len(bodies) == 10_000
    for name in ("referenceId", "title", "description"):
        assert len({b[name] for b in bodies}) == 10_000, name
    assert all(200 <= words(b["description"]) <= 700 for b in bodies)
    counts = {len(b["locations"]) for b in bodies}
    assert counts == {1, 2, 3}
    places = {p["description"] for b in bodies for p in b["locations"]}
    assert len(places) >= 200
    assert len({p.rsplit(", ", 1)[1] for p in places}) >= 8  # provinces and territories
    assert 0.6 < sum("salary" in b for b in bodies) / len(bodies) < 0.95


def test_the_service_accepts_them_as_puts(
    api: Api, employer: Account, bodies: list[dict[str, Any]]
) -> None:
    """A sample across the list, written as the PUT loop writes them: each a create, each
    read back with what was sent."""
    for body in bodies[::500]:
        created = api.put(JOBS, json=body, key=employer.key)
        assert created.status_code == 201, created.text
        job = created.json
        assert (job["referenceId"], job["title"], job["status"]) == (
            body["referenceId"],
            body["title"],
            "active",
        )
        assert [p["description"] for p in job["locations"]] == [
            p["description"] for p in body["locations"]
        ]
        again = api.put(JOBS, json=body, key=employer.key)
        assert again.status_code == 200, again.text


def test_changed_jobs_differ_only_in_their_descriptions(bodies: list[dict[str, Any]]) -> None:
    changed = sync_data.changed(bodies[:10])
    for before, after in zip(bodies[:10], changed, strict=True):
        assert after["description"] != before["description"]
        assert {k: v for k, v in after.items() if k != "description"} == {
            k: v for k, v in before.items() if k != "description"
        }


def test_padded_jobs_come_to_the_size_asked(bodies: list[dict[str, Any]]) -> None:
    size = 50 * 2**20 - 64 * 2**10
    padded = sync_data.padded(bodies, size, prefix="BIG")
    encoded = len(json.dumps({"jobs": padded}).encode())
    assert size - 2 * len(padded) <= encoded <= size
    assert {b["referenceId"] for b in padded}.isdisjoint(b["referenceId"] for b in bodies)
    assert len({b["referenceId"] for b in padded}) == len(bodies)


class Receiver(http.server.BaseHTTPRequestHandler):
    """Records every body it is sent; answers 201, closing the connection when the server
    says so (as gunicorn's sync workers do after each answer)."""

    protocol_version = "HTTP/1.1"
    received: list[bytes]
    lock: threading.Lock
    close: bool
    serial: threading.Lock | None = None  # held while answering: one request at a time

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock:
            self.received.append(body)
        self._answer(201)

    def do_GET(self) -> None:
        if self.serial is not None:
            with self.serial:
                threading.Event().wait(0.05)  # a slow server: 20 answers a second at most
        self._answer(200)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "2")
        if self.close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"{}")
        if self.close:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


def receiver(close: bool, serial: bool = False) -> Iterator[tuple[str, type[Receiver]]]:
    handler = type(
        "Handler",
        (Receiver,),
        {
            "received": [],
            "lock": threading.Lock(),
            "close": close,
            "serial": threading.Lock() if serial else None,
        },
    )
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("close", [True, False], ids=["closing", "keep-alive"])
def test_send_all_sends_each_body_once(close: bool) -> None:
    bodies = [json.dumps({"n": n}).encode() for n in range(300)]
    for url, handler in receiver(close):
        sent = loads.send_all(url, "PUT", JOBS, bodies, {"API-Key": "k"}, connections=8)
        assert sorted(handler.received) == sorted(bodies)
        assert sent.requests == 300 and sent.statuses == {201: 300} and not sent.errors


def test_paced_counts_each_latency_from_when_the_request_was_due() -> None:
    """50 GETs due over 0.5 s to a server answering one at a time, 50 ms each: the last is
    answered at least 2.5 s after the start, 2 s after it was due. A loop that timed each
    request from when it was sent would show 50 ms."""
    for url, _handler in receiver(close=False, serial=True):
        paced = loads.paced(url, "/x", {}, rate=100, seconds=0.5)
        assert paced.requests == 50 and paced.statuses == {200: 50}
        assert paced.p99_ms >= 1500
        assert paced.p50_ms <= paced.p99_ms <= paced.max_ms


def test_paced_stops_when_asked() -> None:
    calls = iter(range(1000))
    for url, _handler in receiver(close=True):
        paced = loads.paced(url, "/x", {}, rate=1000, seconds=60, stop=lambda: next(calls) >= 5)
        assert paced.requests == 5 and paced.statuses == {200: 5}


def test_percentile_is_the_nearest_rank() -> None:
    ordered = [float(n) for n in range(1, 101)]
    assert loads.percentile(ordered, 99) == 99.0
    assert loads.percentile(ordered, 50) == 50.0
    assert loads.percentile([7.0], 99) == 7.0
    assert loads.percentile([], 99) == 0.0


GROW = (
    "import sys, time; import subprocess; "
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import time; b = bytearray(48 * 2**20); print(\"child\", flush=True); time.sleep(60)']); "
    "time.sleep(0.5); b = bytearray(32 * 2**20); print('ready', flush=True); time.sleep(60)"
)


def test_peak_sees_a_process_and_its_children_grow(tmp_path: Path) -> None:
    """A parent holding 32 MiB and a child holding 48 MiB: the tree's peak holds both."""
    with Program([JOBPOST[0], "-c", GROW], tmp_path / "grow.log") as program:
        with memory.Peak(lambda: server.tree_rss_bytes(program.pid), every=0.02) as peak:
            program.wait_until(
                lambda: "ready" in program.text() and "child" in program.text(),
                timeout=30,
                what="the memory to be taken",
            )
        assert peak.highest >= 80 * 2**20
        assert peak.samples[0] < peak.highest
        high = memory.high_water_bytes(program.pid)
        assert high is not None and high >= 32 * 2**20
    assert memory.high_water_bytes(program.pid) is None


@pytest.fixture
def seeded() -> Iterator[seed.Seed]:
    """A migrated PostgreSQL database where the bench's employer holds jobs in every state
    the bench tells apart, beside another employer's; as a Seed of them all."""
    body = factories.job_body(status="active")
    with scratch_postgres() as url:
        engine = make_engine(url)
        try:
            upgrade(engine)
            with session_scope(make_sessionmaker(engine)) as s:
                mine = employers.create_employer(s, "Northwind", "standard")
                other = employers.create_employer(s, "Other", "standard")
                for employer, changes in (
                    (mine, {"referenceId": "A-1"}),
                    (mine, {"referenceId": "A-2"}),
                    (mine, {}),  # no referenceId
                    (mine, {"referenceId": "A-3", "status": "draft"}),
                    (mine, {"referenceId": "A-4", "status": "archived"}),
                    (other, {"referenceId": "A-1"}),
                ):
                    jobs.create(s, employer, body | changes, today=date.today())
                s.flush()
                mine_id = mine.id
            with engine.connect() as conn:
                top = int(conn.scalar(text("SELECT max(id) FROM jobs")) or 0)
        finally:
            engine.dispose()
        yield seed.Seed(url, mine_id, 5, 6, top, "", 0, True, 0.0, 0.0)


def rows(url: str) -> list[tuple[Any, ...]]:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as conn:
        return conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()


def statuses(url: str) -> dict[tuple[int, str | None], str]:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as conn:
        found = conn.execute("SELECT employer_id, reference_id, status FROM jobs").fetchall()
    return {(e, r): s for e, r, s in found}


def test_archived_beforehand_and_put_back_as_they_were(seeded: seed.Seed) -> None:
    before = rows(seeded.url)
    assert sync._archive_beforehand(seeded) == 2
    after = statuses(seeded.url)
    mine = seeded.big_employer_id
    assert after[(mine, "A-1")] == after[(mine, "A-2")] == "archived"
    assert after[(mine, None)] == "active"  # no referenceId: a snapshot leaves it alone
    assert after[(mine, "A-3")] == "draft"
    assert [s for (e, _r), s in after.items() if e != mine] == ["active"]
    conninfo = make_url(seeded.url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as conn:  # what a run might do to one of them
        conn.execute(
            "UPDATE jobs SET title = 'Changed', status = 'active' WHERE reference_id = 'A-2'"
        )
    assert sync._restore(seeded) == 2
    assert rows(seeded.url) == before
    assert sync._restore(seeded) == 0  # nothing kept any more


def test_a_table_left_by_an_interrupted_run_is_put_back_first(seeded: seed.Seed) -> None:
    before = rows(seeded.url)
    assert sync._archive_beforehand(seeded) == 2
    assert sync._archive_beforehand(seeded) == 2  # put back, then archived again
    sync._restore(seeded)
    assert rows(seeded.url) == before


def figures(create: float = 10.0, resend: float = 5.0, worker_mb: int = 120) -> sync.Result:
    """A result whose PUT loops took 100 s and 60 s and whose runs `create` and `resend` s."""
    result = sync.Result(seed.Seed("", 1, 0, 0, 0, "", 0, True, 0.0, 0.0), 300, 11, 2900.0)
    for name, seconds in (("create", 100.0), ("resend", 60.0)):
        sent = loads.Sent(10_000, seconds, {201: 10_000})
        result.loops.append(sync.Loop(name, sent, 1.0, 1.0))
    for name, seconds in (("create", create), ("resend", resend)):
        resource = {"total": 10_000, "created": 10_000}
        run = sync.SyncRun(name, 0.5, 30_000_000, seconds, resource, worker_mb * 2**20, 1.0, 1.0)
        result.runs.append(run)
    result.intake = sync.Intake(50 * 2**20, 202, 2.0, 200 * 2**20, 210 * 2**20)
    return result


def test_targets_follow_the_figures() -> None:
    assert all(t.passed for t in sync.targets(figures()))
    slow = sync.targets(figures(create=25.0, resend=7.0, worker_mb=260))
    assert [t.passed for t in slow] == [False, False, False, True]
    assert "4.0×" in slow[0].measured and "8.6×" in slow[1].measured
    heavy = figures()
    assert heavy.intake is not None
    heavy.intake = replace(heavy.intake, high_water_bytes=301 * 2**20)
    assert [t.passed for t in sync.targets(heavy)] == [True, True, True, False]
    refused = figures()
    assert refused.intake is not None
    refused.intake = replace(refused.intake, status=413)
    assert not sync.targets(refused)[-1].passed


def test_a_figure_not_measured_fails_its_target() -> None:
    empty = sync.Result(seed.Seed("", 1, 0, 0, 0, "", 0, True, 0.0, 0.0), 300, 11, 2900.0)
    found = sync.targets(empty)
    assert len(found) == 4 and not any(t.passed for t in found)
    assert all("not measured" in t.measured for t in found)
    assert "create" in sync.table(figures())


@pytest.mark.parametrize(
    ("outcome", "resource", "accepted"),
    [
        ("created", {"processed": 3, "created": 3}, True),
        ("created", {"processed": 3, "created": 2, "updated": 1}, False),
        ("created", {"processed": 2, "created": 2}, False),  # one still pending
        ("unchanged", {"processed": 3, "unchanged": 2, "updated": 1}, True),
        ("unchanged", {"processed": 3, "unchanged": 2, "failed": 1}, False),
        ("updated", {"processed": 3, "updated": 2, "created": 1}, False),
    ],
)
def test_a_run_whose_items_did_not_all_apply_stops_the_bench(
    outcome: str, resource: dict[str, int], accepted: bool
) -> None:
    run = sync.SyncRun("r", 0.1, 1, 1.0, {"total": 3, **resource}, 0, 0.0, 0.0)
    if accepted:
        sync._check_outcomes(run, outcome, 3)
    else:
        with pytest.raises(RuntimeError, match="expected"):
            sync._check_outcomes(run, outcome, 3)


def test_the_report_prints_the_table_and_writes_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = figures()
    result.load_average = [1.0, 1.5]
    result.commit_ms = 4.0
    options = replace(Options.defaults(), out_dir=tmp_path)
    assert sync._report(options, result) is True
    printed = capsys.readouterr().out
    assert "sync run, create" in printed and "PASS  create run ≥ 5× the PUT loop" in printed
    assert "cannot pass 250 jobs/s" in printed
    written = json.loads((tmp_path / "sync.json").read_text())
    assert written["bench"] == "sync" and len(written["targets"]) == 4
    assert written["runs"][0]["resource"]["created"] == 10_000


def test_database_cpu_counts_the_client_backends(seeded: seed.Seed) -> None:
    conninfo = make_url(seeded.url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as busy:
        found = busy.execute("SELECT pg_backend_pid()").fetchone()
        assert found is not None
        before = sync._backends_cpu(seeded.url)
        assert found[0] in before
        busy.execute("SELECT count(*) FROM generate_series(1, 5000000)")
        assert sync._db_cpu_since(seeded.url, before) > 0
