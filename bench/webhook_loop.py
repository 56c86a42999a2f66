"""The engine bench's baseline for webhooks (C12): a bare loop of threads, each keeping one
HTTP connection (urllib3) to the receiver and POSTing signed messages from a shared queue
until it is empty, as the workers' threads would with nothing around the send.

Each POST is signed when it is sent, as Standard Webhooks asks (the timestamp is the
attempt's): `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed
with the base64-decoded part of the `whsec_` secret after its prefix.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import urllib3

from bench.webhook_receiver import Receiver

USER_AGENT = "jobpost-webhooks/1"
TIMEOUT = urllib3.Timeout(connect=10, read=15)


@dataclass(frozen=True)
class Message:
    """One webhook message as the service stores it: its id and the exact body sent."""

    id: str
    body: bytes


def signed_headers(message: Message, secret: str, timestamp: int) -> dict[str, str]:
    """The headers of one attempt to send `message`, signed with `secret` (`whsec_…`)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = b"%s.%d.%s" % (message.id.encode(), timestamp, message.body)
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "webhook-id": message.id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{signature}",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }


def bare_loop(
    messages: Sequence[Message], receiver: Receiver, secret: str, *, threads: int
) -> float:
    """Messages/s of `threads` threads, each keeping one connection and POSTing messages from
    a shared queue until it is empty; every POST must be answered 2xx and counted."""
    todo: queue.SimpleQueue[Message] = queue.SimpleQueue()
    for message in messages:
        todo.put(message)
    before = receiver.counts()["signed"]
    failures: list[BaseException] = []

    def send() -> None:
        # One pool of one connection per thread: kept alive between POSTs, never shared.
        pool = urllib3.HTTPConnectionPool(
            receiver.host, receiver.port, maxsize=1, block=True, timeout=TIMEOUT, retries=False
        )
        try:
            while True:
                try:
                    message = todo.get_nowait()
                except queue.Empty:
                    return
                headers = signed_headers(message, secret, int(time.time()))
                answer = pool.request(
                    "POST", "/hooks", body=message.body, headers=headers, redirect=False
                )
                if not 200 <= answer.status < 300:
                    raise RuntimeError(f"the receiver answered {answer.status}")
        except BaseException as e:  # shown after the threads are joined
            failures.append(e)
        finally:
            pool.close()

    workers = [threading.Thread(target=send) for _ in range(threads)]
    started = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    seconds = time.perf_counter() - started
    sent = receiver.counts()["signed"] - before
    if failures or sent != len(messages):
        raise RuntimeError(f"bare loop: the receiver counted {sent} of {len(messages)}: {failures}")
    print(f"  bare loop, {threads} threads: {len(messages) / seconds:7,.0f} posts/s", flush=True)
    return len(messages) / seconds
