"""The HTTP client of webhook deliveries (C12), on httpcore (the engine of httpx).

One POST: resolve the URL's host, judge every address it resolves to, connect to an address
that was judged (so DNS that changes between the check and the connection cannot reach a
forbidden one), and send the URL's host name in `Host` and in TLS SNI, the certificate being
verified for that name. httpcore reads no proxy from the environment and follows no
redirect. Every socket operation is bounded by the exchange's wall-clock deadline as well as
its own timeout, so a receiver that drips its answer byte by byte cannot hold the worker.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore

from models.webhooks import urls as webhook_urls

CONNECT_TIMEOUT = 10.0  # seconds (C12)
EXCHANGE_LIMIT = 15.0  # seconds for the whole exchange, connection included (C12)
MAX_ANSWER = 64 * 1024  # bytes of the answer read at most (C12)
USER_AGENT = "jobpost-webhooks/1"
# A kept connection idle this long is not used again: receivers close theirs after 2 s
# (gunicorn) to 75 s (nginx), and a POST sent as the receiver closes is a failed attempt.
KEEPALIVE_EXPIRY = 1.5  # seconds

Resolve = Callable[[str, int, float], list[str]]
AddressAllowed = Callable[[str], bool]


class Refused(Exception):
    """The attempt was not made: the host does not resolve, or resolves to a forbidden address."""


class Unreachable(httpcore.ConnectError):
    """No TCP connection to any address of the receiver: refused, unreachable or timed out,
    told apart in the message only (C12 keeps the reason out of `lastError`)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes  # at most MAX_ANSWER bytes of it


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def bound(self, timeout: float | None, exc: type[Exception]) -> float:
        """`timeout`, cut to what is left of the exchange; past it, `exc` at once."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise exc("the exchange took longer than its limit")
        return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A socket stream whose every operation ends by the deadline of the exchange under way
    (its backend's: a kept connection serves one exchange after another)."""

    def __init__(self, inner: httpcore.NetworkStream, backend: _PinnedBackend) -> None:
        self.inner = inner
        self.backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        bounded = self.backend.deadline.bound(timeout, httpcore.ReadTimeout)
        return self.inner.read(max_bytes, bounded)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, self.backend.deadline.bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = self.backend.deadline.bound(timeout, httpcore.ConnectTimeout)
        return _Stream(self.inner.start_tls(ssl_context, server_hostname, bounded), self.backend)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses, whatever host httpcore asks for: the host name
    still goes into `Host` and SNI, which httpcore takes from the URL. Remembers the address
    it connected to: a kept connection serves a POST only while its name still resolves to
    that address among others all allowed (`Client.post`)."""

    def __init__(self, addresses: Iterable[str], deadline: _Deadline) -> None:
        self.addresses = list(addresses)
        self.deadline = deadline
        self.connected: str | None = None
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception = httpcore.ConnectError("no address to connect to")
        for address in self.addresses:
            try:
                bounded = self.deadline.bound(timeout, httpcore.ConnectTimeout)
                stream = self.inner.connect_tcp(address, port, bounded, None, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                failure = e
                continue
            self.connected = address
            return _Stream(stream, self)
        raise Unreachable(f"{type(failure).__name__}: {failure}") from failure

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class _Kept:
    """A connection kept for the next POST to the same origin, by one thread."""

    pool: httpcore.ConnectionPool
    backend: _PinnedBackend
    closed: bool = False  # by `Client.close`, from any thread


@dataclass(frozen=True)
class Client:
    """How the workers reach receivers: the address judgment and the resolver are seams
    (models.webhooks.urls; tests fake DNS), as is the TLS trust (tests trust a throwaway CA).

    With `keep`, each thread keeps its connection to an origin for the next POST there, as
    a bare loop does (one TCP and TLS handshake an origin, not one a delivery). The name is
    still resolved and every address judged before each POST, and the kept connection is
    used only while its own address is among them; else it is closed and another made."""

    allowed: AddressAllowed
    resolve: Resolve = webhook_urls.resolve  # getaddrinfo within its 2 s
    ssl_context: ssl.SSLContext = field(default_factory=ssl.create_default_context)
    connect_timeout: float = CONNECT_TIMEOUT
    exchange_limit: float = EXCHANGE_LIMIT
    keep: bool = False
    _local: threading.local = field(default_factory=threading.local, compare=False, repr=False)
    _all: list[_Kept] = field(default_factory=list, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def post(self, url: str, body: bytes, headers: dict[str, str], *, limit: float) -> Answer:
        """POST `body`; the exchange ends by `limit` seconds (or EXCHANGE_LIMIT, if sooner).
        Raises Refused for a host that may not be reached, httpcore's errors for the rest."""
        deadline = _Deadline(min(limit, self.exchange_limit))
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        origin = (parts.scheme, host, port)
        try:
            addresses = self.resolve(host, port, min(2.0, self.connect_timeout))
        except (OSError, webhook_urls.Unresolved) as e:
            self._drop(origin)
            raise Refused(f"{host} does not resolve: {e}") from None
        if not addresses:
            self._drop(origin)
            raise Refused(f"{host} does not resolve")
        forbidden = [a for a in addresses if not self.allowed(a)]
        if forbidden:
            self._drop(origin)
            raise Refused(f"{host} resolves to a forbidden address ({forbidden[0]})")
        kept = self._connection(origin, addresses, deadline)
        timeouts = {
            "connect": self.connect_timeout,
            "read": self.exchange_limit,
            "write": self.exchange_limit,
            "pool": self.connect_timeout,
        }
        sent = {**headers, "User-Agent": USER_AGENT, "Content-Length": str(len(body))}
        try:
            with kept.pool.stream(
                "POST",
                url,
                headers=list(sent.items()),
                content=body,
                extensions={"timeout": timeouts},
            ) as response:
                return Answer(response.status, _read_some(response.iter_stream()))
        except BaseException:
            self._drop(origin)
            raise
        finally:
            if not self.keep:
                self._drop(origin)

    def _connection(
        self, origin: tuple[str, str, int], addresses: list[str], deadline: _Deadline
    ) -> _Kept:
        """This thread's kept connection to `origin` if its address is still among the
        judged `addresses`, else a new one pinned to them."""
        kept: dict[tuple[str, str, int], _Kept] = self._local.__dict__.setdefault("kept", {})
        found = kept.get(origin)
        if found is not None and found.closed:
            del kept[origin]
            found = None
        if found is not None and found.backend.connected not in (None, *addresses):
            self._drop(origin)
            found = None
        if found is None:
            backend = _PinnedBackend(addresses, deadline)
            pool = httpcore.ConnectionPool(
                ssl_context=self.ssl_context,
                network_backend=backend,
                max_connections=1,
                keepalive_expiry=KEEPALIVE_EXPIRY,
            )
            found = kept[origin] = _Kept(pool, backend)
            with self._lock:
                self._all.append(found)
        found.backend.addresses, found.backend.deadline = addresses, deadline
        return found

    def _drop(self, origin: tuple[str, str, int]) -> None:
        """Close this thread's connection to `origin`, if it keeps one."""
        found = self._local.__dict__.get("kept", {}).pop(origin, None)
        if found is not None and not found.closed:
            found.pool.close()
            with self._lock:
                if found in self._all:
                    self._all.remove(found)

    def close(self) -> None:
        """Close every thread's kept connections (the worker stops)."""
        with self._lock:
            kept, self._all[:] = list(self._all), []
        for found in kept:
            found.closed = True
            found.pool.close()


def _read_some(chunks: Iterable[bytes]) -> bytes:
    """The first MAX_ANSWER bytes; the rest is never read (the connection is closed)."""
    kept = bytearray()
    for chunk in chunks:
        kept += chunk[: MAX_ANSWER - len(kept)]
        if len(kept) >= MAX_ANSWER:
            break
    return bytes(kept)
