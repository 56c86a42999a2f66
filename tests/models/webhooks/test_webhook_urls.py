"""The address judgment and the resolver of C12's URL rules (the API's tests break each rule
through HTTP; here the parts the workers share, and the resolver's time limit)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from models.webhooks import urls as webhook_urls
from models.webhooks.urls import Unresolved, address_allowed, check_url


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("100.64.0.1", False),
        ("100.63.255.255", True),  # just below the shared space
        ("100.128.0.0", True),  # just above it
        ("192.0.2.1", False),  # documentation
        ("198.18.0.1", False),  # benchmarking
        ("255.255.255.255", False),
        ("::", False),
        ("fe80::1%eth0", False),
        ("::ffff:8.8.8.8", True),
        ("::ffff:192.168.0.1", False),
        ("2002:c0a8:1::1", False),  # 6to4 of 192.168.0.1
        ("2001:0:808:808:0:0:3f57:fefe", False),  # Teredo whose client is 192.168.1.1
        ("64:ff9b::c0a8:1", False),  # NAT64 of 192.168.0.1
        ("64:ff9b:1::1", False),  # local-use NAT64: not global
        ("not an address", False),
    ],
)
def test_address_allowed(address: str, allowed: bool) -> None:
    assert address_allowed(address, allow_private=False) is allowed
    assert address_allowed(address, allow_private=True) is True


def test_the_resolver_gives_up_after_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """getaddrinfo takes no timeout: a look-up that hangs is abandoned at the limit."""
    release = threading.Event()

    def hang(host: str, port: int) -> list[str]:
        release.wait(30)
        return ["8.8.8.8"]

    monkeypatch.setattr(webhook_urls, "_lookup", hang)
    try:
        with pytest.raises(Unresolved, match=r"did not resolve within 0\.05 s"):
            webhook_urls.resolve("slow.example.com", 443, 0.05)
    finally:
        release.set()


def test_the_resolver_reports_a_host_without_address(monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    monkeypatch.setattr(webhook_urls, "_lookup", nothing)
    with pytest.raises(Unresolved, match="does not resolve"):
        webhook_urls.resolve("nowhere.invalid", 443, 2)


def test_the_real_resolver_reads_a_literal_address() -> None:
    assert webhook_urls.resolve("127.0.0.1", 443, 2) == ["127.0.0.1"]
    refused = check_url("https://127.0.0.1/", allow_http=False, allow_private=False)
    assert refused is not None and refused.code == "url_not_allowed"
    assert check_url("https://127.0.0.1/", allow_http=False, allow_private=True) is None


def test_the_port_is_handed_to_the_resolver() -> None:
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int, timeout: float) -> list[str]:
        asked.append((host, port))
        return ["8.8.8.8"]

    for url in ("https://a.example.com/", "https://b.example.com:8443/", "http://c.example.com/"):
        assert check_url(url, allow_http=True, allow_private=False, resolve=resolve) is None
    assert asked == [("a.example.com", 443), ("b.example.com", 8443), ("c.example.com", 80)]


def test_a_host_whose_dns_never_answers_holds_only_the_threads_that_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """C12: four worker threads stuck on a black-holed domain (more than a shared pool of
    four once had) leave every other thread's lookups alone, and each stuck thread keeps at
    most LOOKUPS_PER_THREAD lookups under way."""
    release = threading.Event()
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: int, *args: Any, **kw: Any) -> Any:
        asked.append(host)
        if host == "black.hole.example":
            release.wait(30)
        return real("127.0.0.1", port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    stuck: list[str] = []

    def ask_the_hole() -> None:
        for _ in range(3):
            try:
                webhook_urls.resolve("black.hole.example", 443, 0.1)
            except Unresolved as e:
                stuck.append(str(e))

    try:
        threads = [threading.Thread(target=ask_the_hole) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(stuck) == 12
        assert asked.count("black.hole.example") == 8  # two a thread; the third not sent
        assert sum("have not ended" in e for e in stuck) == 4
        # Not queued behind the stuck lookups: answered within its own 2 s.
        assert webhook_urls.resolve("hooks.example.com", 443, 2) == ["127.0.0.1"]
    finally:
        release.set()
