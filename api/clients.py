"""Who is asking: the client's address for the apply rate limit (C8), through the proxies the
operator trusts (TRUSTED_PROXIES). Behind a load balancer every request comes from the balancer;
X-Forwarded-For says who it came for, but only the entries our own proxies appended can be
believed: a client may write anything to their left."""

from __future__ import annotations

import ipaddress

import falcon

from models.core.settings import Network


def client_address(req: falcon.Request, trusted: tuple[Network, ...]) -> str:
    """The peer's address; when the peer is a trusted proxy, the nearest address of
    X-Forwarded-For (read from the right) that is not one of ours. A malformed entry ends the
    walk at the proxy that passed it on: that proxy's address is then the client's."""
    client = req.remote_addr or "unknown"
    if not _trusted(client, trusted):
        return client
    forwarded = req.get_header("X-Forwarded-For") or ""
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()]):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return client
        client = hop
        if not _trusted(hop, trusted):
            return hop
    return client


def _trusted(address: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def rate_key(address: str) -> str:
    """The client an apply rate limit counts (C8): an IPv4 address, or the /64 network of an
    IPv6 address. A /64 is the least an IPv6 subscriber is given, and any host of it picks new
    addresses at will (RFC 8981), so counting each address apart gives one client a fresh
    budget per address. An IPv4-mapped IPv6 address (a dual-stack socket's) is its IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
