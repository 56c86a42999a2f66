"""A local SMTP sink for the workers and engine benches: accepts every message and counts it,
at once or, with `--data-delay`, replying to the end of each message's DATA that many seconds
late (every other reply at once), as a real relay's round trip would.

Run in a process of its own (`python -m bench.smtp_sink --port N`, or `running(log)` from the
bench), so that its CPU time is neither taken from the load generator nor from the sender being
measured, and shows apart: aiosmtpd is pure Python, and parsing SMTP costs about as much as
speaking it. Messages are counted, never parsed or stored. `NOOP` answers
`250 messages=N bytes=B` (what was accepted so far); SIGTERM or SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import smtplib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP

from tests.harness import Program, free_port

START_TIMEOUT = 60.0


class Counter:
    """aiosmtpd handler: 250 to everything, counting the messages and their bytes."""

    def __init__(self, data_delay: float = 0.0) -> None:
        self.messages = 0
        self.bytes = 0
        self.data_delay = data_delay

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.data_delay:
            await asyncio.sleep(self.data_delay)  # other connections are served meanwhile
        self.messages += 1
        self.bytes += len(envelope.original_content or b"")
        return "250 OK"

    async def handle_NOOP(self, server: Any, session: Any, envelope: Any, arg: str) -> str:
        return f"250 messages={self.messages} bytes={self.bytes}"


async def serve(host: str, port: int, data_delay: float = 0.0) -> None:
    counter = Counter(data_delay)
    loop = asyncio.get_running_loop()
    # hostname given: aiosmtpd would otherwise look up the FQDN for every connection.
    server = await loop.create_server(
        lambda: SMTP(counter, hostname="localhost", loop=loop), host, port
    )
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening on {host}:{port}", flush=True)
    async with server:
        await stop.wait()
    print(f"stopped: messages={counter.messages} bytes={counter.bytes}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.smtp_sink", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--data-delay", type=float, default=0.0, help="seconds before DATA's reply")
    args = p.parse_args()
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    asyncio.run(serve(args.host, args.port, args.data_delay))


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

    def answers(self) -> bool:
        try:
            self.counts()
            return True
        except (OSError, smtplib.SMTPException):
            return False


@contextmanager
def running(log: Path, data_delay: float = 0.0) -> Iterator[Sink]:
    """The sink in a process of its own, on a free port, until the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "bench.smtp_sink", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--data-delay", str(data_delay)]
    with Program(command, log, name="the SMTP sink", stop_timeout=5) as proc:
        sink = Sink("127.0.0.1", port, proc.pid)
        what = f"the SMTP sink to answer (log: {log})"
        proc.wait_until(sink.answers, timeout=START_TIMEOUT, what=what)
        yield sink


if __name__ == "__main__":
    main()
