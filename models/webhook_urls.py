"""PROVISIONAL (branch `hooks` owns this module and replaces it on merge): the address
judgment of C12's URL rules, which the workers apply to every address they connect to."""

from __future__ import annotations

import ipaddress

SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: refused too (C12)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _inner(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 one carries: IPv4-mapped, 6to4, Teredo (both), NAT64."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    if ip in NAT64:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def address_allowed(ip: str, *, allow_private: bool) -> bool:
    """Whether a webhook may be sent to `ip`: global addresses only, an IPv6 address judged
    by the IPv4 addresses inside it too; anything with WEBHOOK_ALLOW_PRIVATE=true."""
    if allow_private:
        return True
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address):
        inner = _inner(address)
        if inner:
            return all(address_allowed(str(a), allow_private=False) for a in inner)
    if address.version == 4 and address in SHARED:
        return False
    return address.is_global and not address.is_multicast
