"""Private processes of the workers bench: a redis-server, an SMTP sink and a Celery worker.

Each is started on a free port in a session (process group) of its own and stopped by its
pid when the bench leaves its `with` block, whatever happened: nothing is found or killed by
name, so the processes of anyone else on the machine are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.server import PROJECT, free_port

START_TIMEOUT = 60.0


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, log: Path) -> None:
    """Poll `check` until it holds; fail after `timeout` seconds, naming `what` and its log."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:.0f} s; see {log}")
        time.sleep(0.1)


Popen = subprocess.Popen[bytes]


def _start(command: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        return subprocess.Popen(
            command,
            cwd=PROJECT,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole, by our pid
        )


def stop(proc: Popen, timeout: float = 15) -> None:
    """SIGTERM to the process, then SIGKILL to the group it leads (its children too)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group was created for it: ours alone
    if proc.poll() is None:
        proc.wait(10)


def _running(proc: Popen, what: str, log: Path) -> None:
    if proc.poll() is not None:
        raise RuntimeError(f"{what} exited ({proc.returncode}); see {log}")


@dataclass(frozen=True)
class Redis:
    url: str
    pid: int


@contextmanager
def redis_server(workdir: Path, log_path: Path) -> Iterator[Redis]:
    """A private redis-server on a free port, persisting nothing."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
        "--daemonize",
        "no",
    ]
    proc = _start(command, log_path)
    try:

        def answers() -> bool:
            _running(proc, "redis-server", log_path)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_until(answers, timeout=10, what="redis-server did not answer", log=log_path)
        yield Redis(f"redis://127.0.0.1:{port}/0", proc.pid)
    finally:
        stop(proc, timeout=5)


@dataclass(frozen=True)
class Sink:
    host: str
    port: int
    pid: int

    def counts(self) -> tuple[int, int]:
        """Messages and bytes the sink has accepted so far (asked with NOOP)."""
        conn = smtplib.SMTP(self.host, self.port, timeout=10)
        try:
            code, reply = conn.noop()
        finally:
            conn.quit()
            conn.close()
        found = re.fullmatch(rb"messages=(\d+) bytes=(\d+)", reply)
        if code != 250 or not found:
            raise RuntimeError(f"the SMTP sink answered NOOP with {code} {reply!r}")
        return int(found.group(1)), int(found.group(2))


@contextmanager
def smtp_sink(log_path: Path) -> Iterator[Sink]:
    """`bench/smtp_sink.py` in a process of its own, on a free port."""
    port = free_port()
    command = [sys.executable, "-m", "bench.smtp_sink", "--host", "127.0.0.1", "--port", str(port)]
    proc = _start(command, log_path)
    sink = Sink("127.0.0.1", port, proc.pid)
    try:

        def answers() -> bool:
            _running(proc, "the SMTP sink", log_path)
            try:
                sink.counts()
                return True
            except (OSError, smtplib.SMTPException):
                return False

        what = "the SMTP sink did not answer"
        wait_until(answers, timeout=START_TIMEOUT, what=what, log=log_path)
        yield sink
    finally:
        stop(proc, timeout=5)


@contextmanager
def worker(
    env: Mapping[str, str], concurrency: int, log_path: Path, ready: Callable[[], bool]
) -> Iterator[int]:
    """`jobpost worker --concurrency N` until `ready()` holds; yields the main process's pid.
    Stopped with a warm shutdown (SIGTERM), its group killed after."""
    command = [
        sys.executable,
        "-m",
        "workers.cli",
        "worker",
        "--concurrency",
        str(concurrency),
    ]
    proc = _start(command, log_path, env)
    try:

        def answers() -> bool:
            _running(proc, "the worker", log_path)
            return ready()

        wait_until(answers, timeout=START_TIMEOUT, what="the worker did not answer", log=log_path)
        yield proc.pid
    finally:
        stop(proc, timeout=20)
