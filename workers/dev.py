"""`jobpost dev`: web, worker, beat and a local SMTP sink in one command (C9).

Everything runs on the embedded defaults (SQLite, the SQLite broker); every message the
sink receives is saved under var/mail/. Ctrl-C stops all of it.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller


class MailDir:
    """An aiosmtpd handler that saves each message as var/mail/<time>-<n>.eml."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.counter = itertools.count(1)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(self.counter)}.eml"
        data = envelope.original_content or envelope.content
        (self.folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
        print(f"mail: saved {self.folder / name} for {', '.join(envelope.rcpt_tos)}", flush=True)
        return "250 Message accepted for delivery"


def start_sink(host: str, port: int, folder: Path) -> Controller:
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    controller = Controller(MailDir(folder), hostname=host, port=port)
    controller.start()
    return controller


def cannot_listen(host: str, port: int) -> str | None:
    """Why a server could not listen on host:port (taken, say), or None if it could."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind
        try:
            sock.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def tell_children(host: str, port: int, public_base_url: str | None) -> str:
    """Set PUBLIC_BASE_URL for the children: the API's address when it is unset. A worker does
    not know where the web listens, and its links (the report email's) name it (C9)."""
    from api.server import listen_url

    base = public_base_url or listen_url(f"{host}:{port}") or ""
    os.environ["PUBLIC_BASE_URL"] = base
    return base


def run(
    host: str,
    port: int,
    smtp_host: str,
    smtp_port: int,
    var: Path,
    public_base_url: str | None = None,
) -> int:
    """Start the sink, then web, worker and beat as child processes; stop them together.
    Nothing starts if the API's or the sink's port is taken (another `make run`, most often):
    a line says which, and the exit status is 1."""
    taken = [
        f"jobpost dev: {what} cannot listen on {h}:{p} ({reason}); is another `make run` "
        f"going? Stop it, or choose another port ({choose})."
        for what, h, p, choose in (
            ("the API", host, port, "--port"),
            ("the mail sink", smtp_host, smtp_port, "SMTP_PORT"),
        )
        if (reason := cannot_listen(h, p))
    ]
    if taken:
        print("\n".join(taken), file=sys.stderr, flush=True)
        return 1
    sink = start_sink(smtp_host, smtp_port, var / "mail")
    jobpost = [sys.executable, "-m", "workers.cli"]
    tell_children(host, port, public_base_url)
    children = [
        subprocess.Popen(
            [*jobpost, "serve", "--host", host, "--port", str(port), "--workers", "2"]
        ),
        subprocess.Popen([*jobpost, "worker", "--concurrency", "1"]),
        subprocess.Popen([*jobpost, "beat"]),
    ]
    print(
        f"jobpost dev: http://{host}:{port}/api/v1.1  mail under {var / 'mail'}  "
        "(Ctrl-C stops everything)",
        flush=True,
    )
    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(c.poll() is None for c in children):
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children:
            try:
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                child.kill()
        sink.stop()
    return 0 if stopping else 1
