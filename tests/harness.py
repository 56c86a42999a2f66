"""The process harness of the tests and the bench: free ports, waiting for a condition, programs
each in a process group of its own, a private redis-server, and SMTP servers in this process.

A program is started in a session (process group) of its own and stopped by its pid, group and
all, whatever happened: nothing is found or killed by name, so the processes of anyone else on
the machine are never touched. Nothing here imports pytest: `python -m bench` uses it too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from aiosmtpd.controller import Controller

ROOT = Path(__file__).resolve().parents[1]
JOBPOST = [sys.executable, "-m", "workers.cli"]  # the `jobpost` command, as this Python runs it
T = TypeVar("T")


def copy_tracked(dest: Path) -> Path:
    """The repository's tracked files as they are in the work tree, copied into `dest`: a
    build there (build/, *.egg-info) leaves nothing in the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(
    check: Callable[[], T | bool | None],
    *,
    timeout: float,
    what: str,
    every: Callable[[], object] | None = None,
    period: float = 1.0,
    interval: float = 0.05,
) -> T | bool:
    """Poll `check` until it returns something truthy; `every` runs each `period` seconds
    (the sweeper, for instance). Fails after `timeout` seconds, naming `what`."""
    deadline = time.monotonic() + timeout
    next_tick = time.monotonic()
    while True:
        now = time.monotonic()
        if every is not None and now >= next_tick:
            every()
            next_tick = now + period
        result = check()
        if result:
            return result
        if now > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def log_tail(path: Path, limit: int = 20_000) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return text if len(text) <= limit else "…" + text[-limit:]


class Program:
    """A command in a session (process group) of its own, without standard input, its output
    written to `log` (its standard error to `errors` instead, when given). `append` keeps what
    the log held: `text()` is this run's part. `stop_timeout`: how long `stop()` (and the end
    of a `with` block) waits for it to exit before killing its group."""

    def __init__(
        self,
        command: Sequence[str],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
        errors: Path | None = None,
        append: bool = False,
        name: str | None = None,
        stop_timeout: float = 15,
    ) -> None:
        self.log, self.errors, self.stop_timeout = log, errors, stop_timeout
        self.name = name or shlex.join(command)
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = log.stat().st_size if append and log.exists() else 0
        mode = "ab" if append else "wb"
        with contextlib.ExitStack() as files:
            out = files.enter_context(log.open(mode))
            err = files.enter_context(errors.open(mode)) if errors else subprocess.STDOUT
            self.proc = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        """What this run has written to its log so far."""
        with self.log.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    def alive(self) -> bool:
        """True while it runs; once it has exited, an AssertionError with the end of its log."""
        if self.proc.poll() is not None:
            tail = log_tail(self.errors or self.log)
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")
        return True

    def wait_until(self, check: Callable[[], object], *, timeout: float, what: str) -> None:
        """Poll `check` until it returns something truthy while the program runs; fails with
        the end of its log if the program exits first or `timeout` seconds pass."""
        try:
            wait_for(lambda: self.alive() and check(), timeout=timeout, what=what)
        except AssertionError as e:
            if self.proc.poll() is not None:
                raise  # alive() said so, with the log
            tail = log_tail(self.errors or self.log)
            raise AssertionError(f"{e}; the log of {self.name}:\n{tail}") from None

    def stop(self, timeout: float | None = None, signum: int = signal.SIGTERM) -> None:
        """`signum` to the main process (SIGTERM: a warm shutdown), then after `timeout`
        seconds SIGKILL to its group, which pool children may outlive their leader in."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
        self._kill_group()

    def kill(self) -> None:
        """SIGKILL to the main process and its group at once: no warm shutdown."""
        self._kill_group()

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group was made for it: ours alone
        if self.proc.poll() is None:
            self.proc.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class RedisServer:
    """A private redis-server on a free port, persisting nothing: it may be stopped and
    started again at will. FileNotFoundError where the program is not installed."""

    def __init__(self, workdir: Path, log: Path | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server is not installed (Debian: redis-server)")
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.log = log or workdir / f"redis-{self.port}.log"
        self.program: Program | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.program is not None, "not started"
        return self.program.pid

    def start(self) -> None:
        assert self.program is None or self.program.proc.poll() is not None, "already running"
        command = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--daemonize",
            "no",
        ]
        restart = self.program is not None  # the log goes on
        self.program = Program(
            command, self.log, append=restart, name="redis-server", stop_timeout=5
        )
        wait_for(self.answers, timeout=10, what=f"redis-server on port {self.port}")

    def answers(self) -> bool:
        if self.program is None or not self.program.alive():
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.program is not None:
            self.program.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class Addressed(Protocol):
    host: str
    port: int


Sink = TypeVar("Sink", bound=Addressed)

# aiosmtpd logs every connection, and every end of one, at INFO from its server's thread. A
# relay kept open by a test's worker is closed late, after pytest closed the capture stream
# a handler of that test was given: "--- Logging error ---" in the suite's output. No test
# reads those lines; its warnings and errors still reach the log.
logging.getLogger("mail.log").setLevel(logging.WARNING)


class SmtpServer(Generic[Sink]):
    """`sink`, an aiosmtpd handler, served on its host and port by an SMTP server in a thread
    of this process from `start()` (a relay may come up late) to `stop()`. `options` go to
    aiosmtpd's Controller (a session `timeout`, `enable_SMTPUTF8`)."""

    def __init__(self, sink: Sink, **options: Any) -> None:
        self.sink, self.options = sink, options
        self.controller: Controller | None = None

    @property
    def port(self) -> int:
        return self.sink.port

    def start(self) -> Sink:
        self.controller = Controller(
            self.sink,
            hostname=self.sink.host,
            port=self.sink.port,
            server_hostname="localhost",  # else aiosmtpd looks up this machine's FQDN
            ready_timeout=5.0,
            **self.options,
        )
        self.controller.start()
        return self.sink

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def __enter__(self) -> Sink:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
