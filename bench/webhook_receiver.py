"""A local webhook receiver for the engine bench (C12): answers every POST with 200, at once
or, with `--delay`, that many seconds late, as a real receiver's round trip would; it serves
many connections at once and keeps each open (HTTP/1.1 keep-alive), as a web server does.

Run in a process of its own (`python -m bench.webhook_receiver --port N`, or `running(log)`
from the bench), for the reasons `bench/smtp_sink.py` gives. POSTs are counted, never parsed
beyond their head: those carrying the three signature headers of the Standard Webhooks
specification (`webhook-id`, `webhook-timestamp`, `webhook-signature` starting `v1,`) are
counted apart, so that a run which sent unsigned requests shows; given `--secret`, each
signature is also verified with the Standard Webhooks library and the good ones counted as
`verified`, so that a sender signing wrongly cannot look fast. `GET /counts` answers
`{"connections": C, "posts": N, "signed": S, "verified": V, "bytes": B}` (C: the
connections that have carried a POST); SIGTERM or SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from standardwebhooks import Webhook, WebhookVerificationError

from tests.harness import Program, free_port

START_TIMEOUT = 60.0
SIGNATURE_HEADERS = (b"webhook-id", b"webhook-timestamp", b"webhook-signature")
MAX_HEAD = 64 * 1024  # a request head longer than this ends its connection
# No proxy from the environment stands between the bench and its receiver.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class Counter:
    """What the receiver has accepted so far."""

    def __init__(self, delay: float, secret: str | None = None) -> None:
        self.delay = delay
        self.verifier = None if secret is None else Webhook(secret)
        self.connections = 0
        self.posts = 0
        self.signed = 0
        self.verified = 0
        self.bytes = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests one after another until the client closes it."""
        posted = False
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return  # closed between requests, or a head too long to be ours
                method, headers = _parse(head)
                if method == b"POST" and not posted:
                    self.connections, posted = self.connections + 1, True
                body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
                writer.write(await self.answer(method, headers, body))
                await writer.drain()
                if headers.get(b"connection", b"").lower() == b"close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return  # a client gone mid-request, or one that speaks no HTTP we know
        finally:
            writer.close()

    async def answer(self, method: bytes, headers: dict[bytes, bytes], body: bytes) -> bytes:
        if method == b"GET":
            counts = {
                "connections": self.connections,
                "posts": self.posts,
                "signed": self.signed,
                "verified": self.verified,
                "bytes": self.bytes,
            }
            text = json.dumps(counts).encode()
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text)
        if self.delay:
            await asyncio.sleep(self.delay)  # other connections are served meanwhile
        self.posts += 1
        self.bytes += len(body)
        if all(name in headers for name in SIGNATURE_HEADERS) and headers[
            b"webhook-signature"
        ].startswith(b"v1,"):
            self.signed += 1
            if self.verifier is not None:
                try:
                    named = {k.decode(): v.decode() for k, v in headers.items()}
                    self.verifier.verify(body, named)
                    self.verified += 1
                except (WebhookVerificationError, UnicodeDecodeError):
                    pass
        return OK


def _parse(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """The method and the headers (names in lower case) of a request head."""
    lines = head[:-4].split(b"\r\n")
    method = lines[0].split(b" ", 1)[0]
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return method, headers


async def serve(host: str, port: int, delay: float = 0.0, secret: str | None = None) -> None:
    counter = Counter(delay, secret)
    server = await asyncio.start_server(counter.serve, host, port, limit=MAX_HEAD, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening on {host}:{port}", flush=True)
    async with server:
        await stop.wait()
    print(
        f"stopped: posts={counter.posts} signed={counter.signed} verified={counter.verified}",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.webhook_receiver", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each POST's answer")
    p.add_argument("--secret", help="whsec_… to verify each signature with")
    args = p.parse_args()
    asyncio.run(serve(args.host, args.port, args.delay, args.secret))


@dataclass(frozen=True)
class Receiver:
    host: str
    port: int
    pid: int

    @property
    def url(self) -> str:
        """Where to POST (any path is taken)."""
        return f"http://{self.host}:{self.port}/hooks"

    def counts(self) -> dict[str, int]:
        """Connections that carried POSTs, POSTs, signed and verified POSTs and body bytes the
        receiver has accepted so far."""
        address = f"http://{self.host}:{self.port}/counts"
        with DIRECT.open(address, timeout=10) as answer:
            counts: dict[str, int] = json.load(answer)
        return counts

    def answers(self) -> bool:
        try:
            self.counts()
            return True
        except (OSError, urllib.error.URLError):
            return False


@contextmanager
def running(log: Path, delay: float = 0.0, secret: str | None = None) -> Iterator[Receiver]:
    """The receiver in a process of its own, on a free port, until the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "bench.webhook_receiver", "--port", str(port)]
    command += ["--delay", str(delay)] + ([] if secret is None else ["--secret", secret])
    with Program(command, log, name="the webhook receiver", stop_timeout=5) as proc:
        receiver = Receiver("127.0.0.1", port, proc.pid)
        what = f"the webhook receiver to answer (log: {log})"
        proc.wait_until(receiver.answers, timeout=START_TIMEOUT, what=what)
        yield receiver


if __name__ == "__main__":
    main()
