"""C8 APPLY_RATE_LIMIT per client address: 429 `rate_limited` with `Retry-After` (C1), in
memory, on fakeredis, and on a real Redis shared by two app instances (C9 REDIS_URL)."""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import falcon
import pytest
import redis
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, create_app
from api.clients import rate_key
from models.core.settings import Settings, networks, rate_limit
from tests.conftest import Api
from tests.factories import create_job, problem
from tests.services import require_redis

API = "/api/v1.1"
APPLICANT = {"name": "Ann Baker", "email": "ann@example.org"}
NOW = 1_000_000.0  # a fixed clock: in minute window 16666, which ends 20 s later


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_api(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    limiter: ratelimit.Limiter | None,
) -> Api:
    return Api(create_app(settings, sessions, Collaborators(limiter=limiter), today=clock))


@pytest.fixture
def job_id(api: Api, employer: Any) -> int:
    job_id: int = create_job(api, employer, status="active")["id"]
    return job_id


def post(api: Api, job_id: int, addr: str = "203.0.113.7", **kw: Any) -> falcon.testing.Result:
    if "body" not in kw:
        kw.setdefault("json", APPLICANT)
    return api.post(f"{API}/jobs/{job_id}/applications", remote_addr=addr, **kw)


def limited(result: falcon.testing.Result) -> int:
    """A C1 429 rate_limited; returns its Retry-After (whole seconds, at least 1)."""
    problem(result, 429, "rate_limited")
    retry_after = result.headers["retry-after"]
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    return int(retry_after)


def check_limit_of_two(api: Api, job_id: int, addr: str) -> None:
    assert post(api, job_id, addr).status_code == 202
    assert post(api, job_id, addr).status_code == 202
    assert limited(post(api, job_id, addr)) == 20
    assert post(api, job_id, "198.51.100.99").status_code == 202  # another address


def test_memory_limiter_allows_two_then_429(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    limiter = ratelimit.MemoryLimiter(2, 60, clock=Clock())
    check_limit_of_two(make_api(settings, sessions, clock, limiter), job_id, "203.0.113.7")


def test_memory_limiter_with_the_real_clock(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    api = make_api(settings, sessions, clock, ratelimit.MemoryLimiter(2, 3600))
    statuses = [post(api, job_id).status_code for _ in range(2)]
    third = post(api, job_id)
    # A window may end between two posts (once an hour): then a fresh window allows it.
    if statuses == [202, 202]:
        assert 1 <= limited(third) <= 3600
    assert post(api, job_id, "2001:db8::1").status_code == 202


def test_a_new_window_allows_again(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    time = Clock()
    api = make_api(settings, sessions, clock, ratelimit.MemoryLimiter(1, 60, clock=time))
    assert post(api, job_id).status_code == 202
    time.now += 19
    assert limited(post(api, job_id)) == 1
    time.now += 1  # the next minute
    assert post(api, job_id).status_code == 202


def test_429_outranks_400_404_and_422(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    # C1 order: 413, 415, then 429 before 400, 404, 409 and 422; every attempt counts.
    api = make_api(settings, sessions, clock, ratelimit.MemoryLimiter(1, 60, clock=Clock()))
    assert post(api, job_id).status_code == 202
    limited(post(api, job_id, body=b"{", content_type="application/json"))
    limited(post(api, 999999))
    limited(post(api, job_id, json={"name": ""}))
    problem(post(api, job_id, body=b"x", content_type="text/plain"), 415, "unsupported_media_type")


def test_redis_limiter_on_fakeredis(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    limiter = ratelimit.RedisLimiter(fakeredis.FakeRedis(), 2, 60, clock=Clock())
    check_limit_of_two(make_api(settings, sessions, clock, limiter), job_id, "203.0.113.7")


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    """The test Redis (db 15); the test's own keys are deleted after it, nothing else."""
    client = redis.Redis.from_url(require_redis())
    yield client
    client.close()


def random_net() -> str:
    """The first 64 bits of an IPv6 address of the documentation prefix, 32 of them random."""
    return f"2001:db8:{secrets.token_hex(2)}:{secrets.token_hex(2)}"


@pytest.fixture
def unique_addr(redis_client: redis.Redis) -> Iterator[str]:
    """A client address no other test uses, so its counters are this test's alone."""
    addr = f"{random_net()}::{secrets.token_hex(2)}"
    yield addr
    for key in redis_client.scan_iter(match=f"jobpost:apply:{rate_key(addr)}:*"):
        redis_client.delete(key)


@pytest.mark.redis
def test_two_app_instances_share_one_redis_count(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    job_id: int,
    unique_addr: str,
) -> None:
    # C9: with REDIS_URL the limit holds across web processes and machines.
    url = require_redis()
    apis = [
        make_api(
            settings,
            sessions,
            clock,
            ratelimit.RedisLimiter(redis.Redis.from_url(url), 2, 60, clock=Clock()),
        )
        for _ in range(2)
    ]
    assert post(apis[0], job_id, unique_addr).status_code == 202
    assert post(apis[1], job_id, unique_addr).status_code == 202
    assert limited(post(apis[0], job_id, unique_addr)) == 20
    assert limited(post(apis[1], job_id, unique_addr)) == 20
    # Another client has its own count.
    other = f"{random_net()}::1"
    try:
        assert post(apis[1], job_id, other).status_code == 202
    finally:
        redis.Redis.from_url(url).delete(f"jobpost:apply:{rate_key(other)}:{int(NOW // 60)}")


@pytest.mark.redis
def test_built_from_settings_with_redis_url(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    job_id: int,
    redis_client: redis.Redis,
    unique_addr: str,
) -> None:
    # create_app builds the limiter from APPLY_RATE_LIMIT and REDIS_URL when none is given.
    shared = dataclasses.replace(settings, apply_rate_limit="2/hour", redis_url=require_redis())
    assert isinstance(ratelimit.build("2/hour", require_redis()), ratelimit.RedisLimiter)
    first, second = (make_api(shared, sessions, clock, None) for _ in range(2))
    codes = [post(api, job_id, unique_addr).status_code for api in (first, second, first)]
    keys = list(redis_client.scan_iter(match=f"jobpost:apply:{rate_key(unique_addr)}:*"))
    assert keys and 0 < redis_client.ttl(keys[0]) <= 3601
    if len(keys) == 1:  # no hour boundary crossed between the posts
        assert codes == [202, 202, 429]


# --- who is one client: an IPv4 address, an IPv6 /64 (C8) ----------------------------------------


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("::ffff:cb00:7107", "203.0.113.7"),
        ("::1", "::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("unknown", "unknown"),
    ],
)
def test_the_rate_key_of_an_address(address: str, key: str) -> None:
    assert rate_key(address) == key


@dataclasses.dataclass(frozen=True)
class Clients:
    """Addresses no other test run uses: two IPv6 /64 networks, two IPv4 addresses."""

    net: str = dataclasses.field(default_factory=random_net)
    other_net: str = dataclasses.field(default_factory=random_net)
    # 198.18.0.0/15, the benchmarking range, less its last address
    v4: str = dataclasses.field(
        default_factory=lambda: str(ipaddress.ip_address("198.18.0.0") + secrets.randbelow(131071))
    )

    @property
    def next_v4(self) -> str:
        return str(ipaddress.ip_address(self.v4) + 1)

    def keys(self, window: int) -> list[str]:
        addresses = (f"{self.net}::", f"{self.other_net}::", self.v4, self.next_v4)
        return [f"jobpost:apply:{rate_key(a)}:{window}" for a in addresses]


@pytest.fixture
def clients() -> Clients:
    return Clients()


@pytest.fixture(params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.redis)])
def limiter_of_two(request: pytest.FixtureRequest, clients: Clients) -> Iterator[ratelimit.Limiter]:
    """Two applications a minute per client, counted in memory, on fakeredis, or on the test
    Redis (where the keys of `clients` are deleted after the test)."""
    if request.param == "memory":
        yield ratelimit.MemoryLimiter(2, 60, clock=Clock())
    elif request.param == "fakeredis":
        yield ratelimit.RedisLimiter(fakeredis.FakeRedis(), 2, 60, clock=Clock())
    else:
        client = redis.Redis.from_url(require_redis())
        yield ratelimit.RedisLimiter(client, 2, 60, clock=Clock())
        client.delete(*clients.keys(int(NOW // 60)))
        client.close()


def test_the_addresses_of_one_ipv6_64_share_one_budget(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    job_id: int,
    limiter_of_two: ratelimit.Limiter,
    clients: Clients,
) -> None:
    """C8 per client address: a host of a /64 picks new addresses at will (privacy addresses,
    or any of its 2^64), so each address apart would be a fresh budget per request."""
    api = make_api(settings, sessions, clock, limiter_of_two)
    assert post(api, job_id, f"{clients.net}::1").status_code == 202
    assert post(api, job_id, f"{clients.net}:a:b:c:d").status_code == 202
    assert limited(post(api, job_id, f"{clients.net}:ffff:ffff:ffff:ffff")) == 20
    assert post(api, job_id, f"{clients.other_net}::1").status_code == 202  # another /64


def test_an_ipv4_address_is_one_client_mapped_to_ipv6_or_not(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    job_id: int,
    limiter_of_two: ratelimit.Limiter,
    clients: Clients,
) -> None:
    """A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d: the same client."""
    api = make_api(settings, sessions, clock, limiter_of_two)
    assert post(api, job_id, clients.v4).status_code == 202
    assert post(api, job_id, f"::ffff:{clients.v4}").status_code == 202
    assert limited(post(api, job_id, clients.v4)) == 20
    assert post(api, job_id, clients.next_v4).status_code == 202  # IPv4: per address


@pytest.mark.parametrize("state", ["refusing", "silent"])
def test_a_redis_that_is_down_does_not_turn_applicants_away(state: str) -> None:
    # The limiter REDIS_URL builds: a store that is down lets applicants through, quickly.
    with socket.socket() as silent:  # accepts connections (backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1] if state == "silent" else 1
        limiter = ratelimit.build("1/minute", f"redis://127.0.0.1:{port}/0")
        assert isinstance(limiter, ratelimit.RedisLimiter)
        started = time.monotonic()
        assert [limiter.hit("203.0.113.7") for _ in range(3)] == [None, None, None]
        assert time.monotonic() - started < 3 * 0.4  # C8: with the enqueue, about a second


def test_the_default_limit_is_10_a_minute_per_process(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    # C9 default APPLY_RATE_LIMIT=10/minute; without REDIS_URL the count is per process.
    assert settings.apply_rate_limit == "10/minute" and settings.redis_url is None
    assert isinstance(ratelimit.build("10/minute", None), ratelimit.MemoryLimiter)
    api = make_api(settings, sessions, clock, None)
    codes = [post(api, job_id).status_code for _ in range(11)]
    if codes[:10] == [202] * 10:  # else a minute ended mid-test: a fresh window
        assert codes[10] == 429


def test_off_never_limits(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    api = make_api(dataclasses.replace(settings, apply_rate_limit="off"), sessions, clock, None)
    assert [post(api, job_id).status_code for _ in range(15)] == [202] * 15
    assert isinstance(ratelimit.build("off", "redis://127.0.0.1:6379/15"), ratelimit.Unlimited)


@pytest.mark.parametrize(
    ("rule", "parsed"),
    [
        ("10/minute", (10, 60)),
        ("1/second", (1, 1)),
        ("500/hour", (500, 3600)),
        (" 3 / minute ", (3, 60)),
        ("off", None),
        ("OFF", None),
        (" off ", None),
    ],
)
def test_parse(rule: str, parsed: tuple[int, int] | None) -> None:
    assert rate_limit(rule) == parsed


@pytest.mark.parametrize(
    "rule", ["", "10", "ten/minute", "10/day", "0/minute", "-1/minute", "10/min", "10 per minute"]
)
def test_a_bad_rule_is_a_value_error(rule: str) -> None:
    with pytest.raises(ValueError, match="APPLY_RATE_LIMIT"):
        rate_limit(rule)
    with pytest.raises(ValueError):
        ratelimit.build(rule, None)


# --- behind proxies (TRUSTED_PROXIES) ------------------------------------------------------------


def via(forwarded_for: str) -> dict[str, Any]:
    return {"headers": {"X-Forwarded-For": forwarded_for}}


def test_x_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    """C8 "per client address": by default the peer is the client, and a header any client
    can write changes nothing (else each request could claim a new address)."""
    api = make_api(settings, sessions, clock, ratelimit.MemoryLimiter(2, 60, clock=Clock()))
    assert post(api, job_id, **via("198.51.100.1")).status_code == 202
    assert post(api, job_id, **via("198.51.100.2")).status_code == 202
    limited(post(api, job_id, **via("198.51.100.3")))


def test_behind_trusted_proxies_each_client_has_its_own_budget(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, job_id: int
) -> None:
    """The nearest untrusted address of X-Forwarded-For is the client; what a client writes
    to its left (a made-up address) counts for nothing."""
    behind = dataclasses.replace(settings, trusted_proxies=networks("10.0.0.1, 10.1.0.0/16"))
    api = make_api(behind, sessions, clock, ratelimit.MemoryLimiter(2, 60, clock=Clock()))
    lb = "10.0.0.1"  # the load balancer, the peer of every request
    assert post(api, job_id, lb, **via("203.0.113.7")).status_code == 202
    assert post(api, job_id, lb, **via("192.0.2.99, 203.0.113.7")).status_code == 202
    limited(post(api, job_id, lb, **via("192.0.2.98, 203.0.113.7, 10.1.2.3")))  # two proxies
    assert post(api, job_id, lb, **via("203.0.113.8")).status_code == 202  # another client
    assert post(api, job_id, "203.0.113.9", **via("203.0.113.8")).status_code == 202  # direct
    # Without the header, or with a malformed hop, the proxy is all that is known.
    assert post(api, job_id, lb).status_code == 202
    assert post(api, job_id, lb, **via("not-an-ip")).status_code == 202
    limited(post(api, job_id, lb, **via("203.0.113.10, garbage")))


@pytest.mark.parametrize("value", ["10.0.0.0/33", "proxy.internal", "10.0.0.1,,nope"])
def test_a_malformed_trusted_proxies_entry_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValueError, match=r"TRUSTED_PROXIES: .* is not an address or network"):
        Settings.from_env({"TRUSTED_PROXIES": value})
