"""C9: the metric files of PROMETHEUS_MULTIPROC_DIR over a long run of `jobpost serve`.

Each gunicorn worker counts into files of its own pid. Workers are replaced over weeks (a
timeout, a HUP reload); the master folds a dead one's counts into one file per kind
(`api.server.child_exit`), so the folder holds the live workers' files and those, whatever
number of workers came and went, and the sums a scrape reports stay what they were. The
workers here are real processes counting through prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from api.observability import scrape
from api.server import child_exit

# A worker's requests: as api.observability counts them, each with its own histogram.
WORKER = """
import sys
from prometheus_client import Counter, Histogram
requests = Counter("http_requests", "", ["method", "route", "status"])
duration = Histogram("http_request_duration_seconds", "", ["method", "route"], buckets=(0.1, 1))
for route, n in (("/healthz", int(sys.argv[1])), ("/metrics", 1)):
    for _ in range(n):
        requests.labels("GET", route, "200").inc()
        duration.labels("GET", route).observe(0.5)
print(__import__("os").getpid())
"""


def worker(folder: Path, requests: int) -> int:
    """A worker process that answered `requests` GET /healthz (and one scrape), then exited;
    its pid."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(requests)],
        env={"PROMETHEUS_MULTIPROC_DIR": str(folder)},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def sums(folder: Path) -> dict[tuple[str, str], float]:
    """What a scrape reports: each sample's value by its name and route."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(scrape(registry).decode()):
        for sample in family.samples:
            key = (sample.name + sample.labels.get("le", ""), sample.labels["route"])
            found[key] = found.get(key, 0) + sample.value
    return found


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_the_files_of_dead_workers_are_folded_into_one_per_kind_and_no_count_is_lost(
    tmp_path: Path,
) -> None:
    gone = child_exit(str(tmp_path))  # the hook `jobpost serve` gives gunicorn
    pids = [worker(tmp_path, requests) for requests in (3, 4, 5, 6)]
    before = sums(tmp_path)
    assert before[("http_requests_total", "/healthz")] == 18
    assert before[("http_request_duration_seconds_bucket1.0", "/healthz")] == 18

    for pid in pids[:3]:  # gunicorn replaced three of them, one after another
        gone(None, SimpleNamespace(pid=pid))
        assert sums(tmp_path) == before

    live = pids[3]
    assert files(tmp_path) == {
        "counter_gone.db",
        f"counter_{live}.db",
        "histogram_gone.db",
        f"histogram_{live}.db",
    }
    gone(None, SimpleNamespace(pid=live))
    assert files(tmp_path) == {"counter_gone.db", "histogram_gone.db"}
    assert sums(tmp_path) == before


def test_a_file_folded_away_while_a_scrape_reads_the_folder_costs_that_scrape_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The master removes a dead worker's files while a live one may be answering a scrape:
    the file it listed is gone when it reads it."""
    worker(tmp_path, 2)
    listing = glob.glob

    def listed_before_the_fold(pattern: str, **kwargs: object) -> list[str]:
        monkeypatch.setattr(glob, "glob", listing)  # the next listing is the folder's own
        return [*listing(pattern), str(tmp_path / "counter_99999999.db")]

    monkeypatch.setattr(glob, "glob", listed_before_the_fold)
    assert sums(tmp_path)[("http_requests_total", "/healthz")] == 2
