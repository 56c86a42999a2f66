"""Two loads wrk does not make: a fixed list of requests sent once each over N connections
(the PUT loop an ATS runs without sync runs), and GETs at a fixed rate (latency under a
steady load, with and without a sync run going on).

Both use http.client in threads, one connection a thread, reopened when the server closes
it (gunicorn's sync workers close after each answer). At the rates involved (hundreds of
writes a second, tens of GETs) the client's own CPU is a small part of one core.
"""

from __future__ import annotations

import http.client
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Sent:
    """What a list of requests sent once each came to."""

    requests: int
    seconds: float  # from the first request sent to the last answer read
    statuses: dict[int, int]
    errors: list[str] = field(default_factory=list)  # socket errors, the first few

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Paced:
    """GETs sent at a fixed rate: each latency counts from when the request was due, so a
    request that waited for a free connection counts its wait (no coordinated omission)."""

    rate: float  # requests a second asked for
    requests: int
    seconds: float
    statuses: dict[int, int]
    p50_ms: float
    p99_ms: float
    max_ms: float


class _Connection:
    """One kept connection to `base_url`, opened again whenever the server closed it."""

    def __init__(self, base_url: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        host = parts.hostname or "127.0.0.1"
        self.conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)

    def send(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> int:
        try:
            self.conn.request(method, path, body=body, headers=dict(headers))
            answer = self.conn.getresponse()
            answer.read()
        except (ConnectionError, http.client.HTTPException):
            self.conn.close()  # a closed keep-alive connection: once more on a new one
            self.conn.request(method, path, body=body, headers=dict(headers))
            answer = self.conn.getresponse()
            answer.read()
        if answer.will_close:
            self.conn.close()
        return answer.status

    def close(self) -> None:
        self.conn.close()


def send_all(
    base_url: str,
    method: str,
    path: str,
    bodies: Sequence[bytes],
    headers: Mapping[str, str],
    *,
    connections: int,
    timeout: float = 60,
) -> Sent:
    """Each of `bodies` sent once as `method path`, by `connections` threads taking the next
    body as soon as their last one is answered."""
    todo: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    for body in bodies:
        todo.put(body)
    statuses: dict[int, int] = {}
    errors: list[str] = []
    lock = threading.Lock()
    headers = {**headers, "Content-Type": "application/json"}

    def work() -> None:
        connection = _Connection(base_url, timeout)
        try:
            while True:
                try:
                    body = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    status = connection.send(method, path, body, headers)
                except OSError as e:
                    status = 0
                    with lock:
                        errors.append(repr(e))
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(connections)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    return Sent(len(bodies), seconds, statuses, errors[:5])


def paced(
    base_url: str,
    path: str,
    headers: Mapping[str, str],
    *,
    rate: float,
    seconds: float,
    stop: Callable[[], bool] = lambda: False,
    connections: int = 8,
    timeout: float = 30,
) -> Paced:
    """GET `path` `rate` times a second for `seconds` (or until `stop()`), on up to
    `connections` connections at once."""
    local = threading.local()
    opened: list[_Connection] = []  # closed once every request is answered

    def get(due: float) -> tuple[float, int]:
        if not hasattr(local, "connection"):
            local.connection = _Connection(base_url, timeout)
            opened.append(local.connection)
        try:
            status = local.connection.send("GET", path, None, headers)
        except OSError:
            status = 0
        return time.perf_counter() - due, status

    interval = 1 / rate
    futures: list[Future[tuple[float, int]]] = []
    with ThreadPoolExecutor(connections, thread_name_prefix="paced") as pool:
        started = time.perf_counter()
        while True:
            due = started + len(futures) * interval
            if due - started >= seconds or stop():
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            futures.append(pool.submit(get, due))
        answers = [f.result() for f in futures]
    for connection in opened:
        connection.close()
    elapsed = time.perf_counter() - started
    latencies = sorted(seconds_ * 1000 for seconds_, _status in answers)
    statuses: dict[int, int] = {}
    for _latency, status in answers:
        statuses[status] = statuses.get(status, 0) + 1
    return Paced(
        rate,
        len(answers),
        elapsed,
        statuses,
        percentile(latencies, 50),
        percentile(latencies, 99),
        latencies[-1] if latencies else 0.0,
    )


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank percentile of an ascending list (0 when it is empty)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100), at least the first
    return ordered[int(rank) - 1]
