"""C12's URL rules for webhook endpoints, and the judgment of an address.

`check_url` runs on every write of an endpoint's URL; the workers judge again, with
`address_allowed`, the address they actually connect to at every delivery (DNS may change
between the two). `resolve` is a seam: tests give a resolver of their own.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import SplitResult, urlsplit

from models.core.errors import FieldError

MAX_URL = 2000
RESOLVE_SECONDS = 2.0  # a host that does not resolve within this is refused (C12)
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, refused too (C12)
NAT64 = ipaddress.ip_network("64:ff9b::/96")

Resolve = Callable[[str, int, float], list[str]]
PortRanges = tuple[tuple[int, int], ...]  # WEBHOOK_ALLOWED_PORTS, as models.core.settings reads it
# C12: web ports only, so that an endpoint cannot aim the workers at a database or a mail
# server; plain HTTP's only where it is allowed. WEBHOOK_ALLOWED_PORTS adds others.
TLS_PORTS = (443, 8443)
PLAIN_PORTS = (80, 8080)


def port_allowed(port: int, *, allow_http: bool, extra: PortRanges = ()) -> bool:
    """Whether a webhook URL may name `port` (C12)."""
    if port in TLS_PORTS or (allow_http and port in PLAIN_PORTS):
        return True
    return any(low <= port <= high for low, high in extra)


def url_port(parts: SplitResult) -> int:
    """The port a URL names, or its scheme's."""
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


class Unresolved(Exception):
    """The host has no address, or none within the time allowed."""


def _lookup(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# getaddrinfo takes no timeout: each lookup runs in a thread of its own, abandoned past the
# limit. Each thread that asks (a worker's, a web request's) has at most this many lookups
# under way, abandoned ones included: a host whose DNS never answers holds the thread that
# asked for it, never the lookups of the others (C12). No pool is shared.
LOOKUPS_PER_THREAD = 2
_asking = threading.local()


def _start(host: str, port: int) -> concurrent.futures.Future[list[str]]:
    future: concurrent.futures.Future[list[str]] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(_lookup(host, port))
        except BaseException as e:  # handed to the thread that waits, if it still does
            future.set_exception(e)

    threading.Thread(target=run, name="resolve", daemon=True).start()
    return future


def resolve(host: str, port: int, timeout: float) -> list[str]:
    """Every address `host` resolves to, within `timeout` seconds; Unresolved otherwise."""
    deadline = time.monotonic() + timeout
    pending: list[concurrent.futures.Future[list[str]]] = _asking.__dict__.setdefault("p", [])
    pending[:] = [f for f in pending if not f.done()]
    if len(pending) >= LOOKUPS_PER_THREAD:
        concurrent.futures.wait(pending, timeout, concurrent.futures.FIRST_COMPLETED)
        pending[:] = [f for f in pending if not f.done()]
        if len(pending) >= LOOKUPS_PER_THREAD:
            raise Unresolved(f"{host} was not looked up: earlier lookups have not ended")
    future = _start(host, port)
    pending.append(future)
    try:
        found = future.result(timeout=max(0.0, deadline - time.monotonic()))
    except concurrent.futures.TimeoutError:
        raise Unresolved(f"{host} did not resolve within {timeout:g} s") from None
    except (OSError, UnicodeError) as e:
        raise Unresolved(f"{host} does not resolve ({e})") from None
    if not found:
        raise Unresolved(f"{host} has no address")
    return found


def _inner(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 one carries: IPv4-mapped, 6to4, Teredo (server and
    client), NAT64's well-known prefix."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    if ip in NAT64:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def _global(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    special = (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )
    return ip.is_global and not special and ip not in SHARED


def address_allowed(ip: str, *, allow_private: bool) -> bool:
    """Whether a webhook may go to `ip` (C12): a global address; an IPv6 address that carries
    IPv4 ones is judged by those (every one of them). Anything, with WEBHOOK_ALLOW_PRIVATE."""
    if allow_private:
        return True
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:  # fe80::1%eth0: a link's address
            return False
        inner = _inner(address)
        if inner:
            return all(_global(v4) for v4 in inner)
    return _global(address)


def _parsed(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError:
        return None
    return parts


def check_url(
    url: object,
    *,
    allow_http: bool,
    allow_private: bool,
    resolve: Resolve = resolve,
    field: str = "url",
    allowed_ports: PortRanges = (),
) -> FieldError | None:
    """The first rule of C12 that `url` breaks, as the C1 entry to answer; None if it keeps
    them all. Every address its host resolves to must be allowed."""
    if not isinstance(url, str):
        return FieldError(field, "invalid_type", f"{field} must be a string.")
    if len(url) > MAX_URL:
        return FieldError(field, "too_long", f"{field} has at most {MAX_URL} characters.")
    schemes = ("https", "http") if allow_http else ("https",)
    shown = " or ".join(schemes)
    parts = _parsed(url)
    bad = (
        parts is None
        or parts.scheme.lower() not in schemes
        or not parts.hostname
        or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url)
    )
    if bad or parts is None:
        return FieldError(field, "invalid_format", f"{field} must be an absolute {shown} URL.")
    if parts.username is not None or parts.password is not None:
        return FieldError(field, "invalid_format", f"{field} must not carry a user or password.")
    host = parts.hostname
    assert host is not None
    port = url_port(parts)
    if not port_allowed(port, allow_http=allow_http, extra=allowed_ports):
        ports = TLS_PORTS + (PLAIN_PORTS if allow_http else ())
        shown_ports = ", ".join(map(str, sorted(ports)))
        return FieldError(
            field,
            "url_not_allowed",
            f"{field}'s port {port} is not allowed: use a web port ({shown_ports}).",
        )
    try:
        addresses = resolve(host, port, RESOLVE_SECONDS)
    except Unresolved as e:
        return FieldError(field, "url_not_allowed", f"{field}'s host cannot be used: {e}.")
    if not addresses:
        return FieldError(field, "url_not_allowed", f"{field}'s host {host} has no address.")
    for address in addresses:
        if not address_allowed(address, allow_private=allow_private):
            return FieldError(
                field,
                "url_not_allowed",
                f"{field}'s host {host} resolves to {address}, which is not a public address.",
            )
    return None
