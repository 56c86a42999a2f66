"""The API as production runs it: `jobpost serve` (gunicorn, sync workers), one worker per core."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.http import Client
from tests.harness import JOBPOST, Program, free_port

START_TIMEOUT = 60.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cores() -> int:
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class Server:
    base_url: str
    master_pid: int
    workers: int

    def worker_pids(self) -> list[int]:
        """The gunicorn workers: the children of the master process."""
        return [pid for pid in _pids() if _parent(pid) == self.master_pid]

    def rss_bytes(self) -> dict[int, int]:
        """Resident memory (VmRSS) of each worker, by pid."""
        return {pid: rss for pid in self.worker_pids() if (rss := _rss(pid)) is not None}

    def master_rss_bytes(self) -> int | None:
        return _rss(self.master_pid)

    def cpu_seconds(self) -> float:
        """CPU time (user and system) the workers have used so far. Per request, it is a cost
        that other processes competing for the cores hardly change, unlike wall time."""
        return sum(_cpu(pid) for pid in self.worker_pids())


@contextmanager
def gunicorn(
    database_url: str, workers: int, log_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """`jobpost serve` on a free port against `database_url`, until it answers; stopped after.
    `env`: more environment for the server (a broker, an SMTP relay, a rate limit)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jobpost-bench-prom-") as prom:
        environ = {
            **os.environ,
            **(env or {}),
            "DATABASE_URL": database_url,
            "PROMETHEUS_MULTIPROC_DIR": prom,
        }
        command = [*JOBPOST, "serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--workers", str(workers)]
        with running(command, port, workers, log_path, environ, "the server") as server:
            yield server


@contextmanager
def running(
    command: list[str], port: int, workers: int, log_path: Path, env: Mapping[str, str], name: str
) -> Iterator[Server]:
    """A gunicorn `command` serving on `port`, until it answers; stopped after."""
    # Stopped with SIGTERM: gunicorn's graceful shutdown of its workers.
    with Program(command, log_path, env=env, name=name, stop_timeout=30) as proc:
        server = Server(f"http://127.0.0.1:{port}", proc.pid, workers)
        what = f"{name} to answer (log: {log_path})"
        proc.wait_until(lambda: _answering(server), timeout=START_TIMEOUT, what=what)
        yield server


def _answering(server: Server) -> bool:
    """The port answers HTTP (any status) and every worker has booted."""
    try:
        Client(server.base_url, timeout=2).request("GET", "/healthz", auth=False)
    except OSError:
        return False
    return len(server.worker_pids()) >= server.workers


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) process `pid` has used so far; 0 when it is gone."""
    return _cpu(pid)


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of process `pid` and its children (a Celery worker and its pool, say)."""
    return _cpu(pid) + sum(_cpu(child) for child in _pids() if _parent(child) == pid)


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` and its children (a Celery worker and its pool)."""
    pids = [pid, *(child for child in _pids() if _parent(child) == pid)]
    return sum(_rss(p) or 0 for p in pids)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat from the third (state) on; empty if the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name is in parentheses and may hold spaces: fields follow the last ")".
    return stat[stat.rindex(")") + 2 :].split()


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _cpu(pid: int) -> float:
    fields = _stat(pid)  # utime and stime are the 14th and 15th fields, in clock ticks
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS if fields else 0.0


def _rss(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # kB
    return None
