"""Limits of the keyed API (C23): every request counts against its key and its employer, in
fixed windows shared by every web process through Redis (REDIS_URL; else per process), by the
employer's plan. Answers carry the IETF `RateLimit-Policy` and `RateLimit` headers
(draft-ietf-httpapi-ratelimit-headers); over a limit, 429 `rate_limited` with `Retry-After`.
A sync run's jobs count one each, so a run of 10,000 items cannot slip past the limit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import falcon

from api.errors import Problem
from models.core.settings import Settings, rate_limit

log = logging.getLogger("jobpost.api")

# A healthy Redis answers within a millisecond; a silent one lets the request through.
TIMEOUT_SECONDS = 0.05


@dataclass(frozen=True)
class Policy:
    """A quota of `quota` units a `window` of seconds, for what `name` names."""

    name: str  # "key" or "employer"
    quota: int
    window: int

    def header(self) -> str:
        return f'"{self.name}";q={self.quota};w={self.window}'


@dataclass(frozen=True)
class Standing:
    """Where a counter stands after a charge: what is left, and when its window ends."""

    policy: Policy
    remaining: int
    reset: int  # seconds

    @property
    def over(self) -> bool:
        return self.remaining < 0


@dataclass(frozen=True)
class Plans:
    """The (key, employer) policies of each plan; None: no limit (`off`)."""

    by_plan: dict[str, tuple[Policy | None, Policy | None]]

    @staticmethod
    def of(settings: Settings) -> Plans:
        found = {}
        for plan, key_rule, employer_rule in settings.api_rate_limits:
            found[plan] = (_policy("key", key_rule), _policy("employer", employer_rule))
        return Plans(found)


def _policy(name: str, rule: str) -> Policy | None:
    parsed = rate_limit(rule)
    return None if parsed is None else Policy(name, parsed[0], parsed[1])


class Counters:
    """Fixed-window counters: Redis's, or this process's when no REDIS_URL is set."""

    def __init__(self, client: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.client, self.clock = client, clock
        self.lock = threading.Lock()
        self.local: dict[str, int] = {}

    def add(self, names: list[tuple[str, Policy]], cost: int) -> list[Standing] | None:
        """Add `cost` to each named counter; where each stands, or None when Redis fails
        (the request goes through: a limiter that is down must not stop the API)."""
        now = self.clock()
        keyed = [(f"{name}:{int(now // p.window)}", p) for name, p in names]
        counts = self._redis(keyed, cost) if self.client is not None else self._memory(keyed, cost)
        if counts is None:
            return None
        return [
            Standing(p, p.quota - n, max(1, int((int(now // p.window) + 1) * p.window - now)))
            for (_, p), n in zip(keyed, counts, strict=True)
        ]

    def _redis(self, keyed: list[tuple[str, Policy]], cost: int) -> list[int] | None:
        try:
            pipe = self.client.pipeline(transaction=False)
            for name, p in keyed:
                pipe.incrby(f"jobpost:quota:{name}", cost)
                pipe.expire(f"jobpost:quota:{name}", p.window + 1)
            return [int(n) for n in pipe.execute()[::2]]
        except Exception as e:
            log.warning("rate limits not counted: %s", type(e).__name__)
            return None

    def _memory(self, keyed: list[tuple[str, Policy]], cost: int) -> list[int]:
        with self.lock:
            if len(self.local) > 100_000:  # old windows' counters: drop them all
                self.local.clear()
            counts = []
            for name, _ in keyed:
                counts.append(self.local.get(name, 0) + cost)
                self.local[name] = counts[-1]
            return counts


class Quotas:
    """The app's limits: the plans' policies and the shared counters."""

    def __init__(self, plans: Plans, counters: Counters) -> None:
        self.plans, self.counters = plans, counters

    def charge(self, req: falcon.Request, cost: int = 1) -> None:
        """Count `cost` against the request's key and employer; 429 when either is over.
        What the answer's RateLimit headers say is kept on `req.context.standing`."""
        access = req.context.access
        key_policy, employer_policy = self.plans.by_plan.get(access.plan, (None, None))
        names = []
        if key_policy is not None:
            names.append((f"k{access.key_id}", key_policy))
        if employer_policy is not None:
            names.append((f"e{access.employer_id}", employer_policy))
        if not names:
            return
        standing = self.counters.add(names, cost)
        if standing is None:
            return
        req.context.standing = standing
        over = [s for s in standing if s.over]
        if over:
            wait = max(s.reset for s in over)
            raise Problem(
                429,
                "rate_limited",
                f"Over the {over[0].policy.name}'s limit of {over[0].policy.quota} requests "
                f"per {over[0].policy.window} s; retry in {wait} s.",
                headers={"Retry-After": str(wait), **headers(standing)},
            )


def headers(standing: list[Standing]) -> dict[str, str]:
    """`RateLimit-Policy` with every policy, `RateLimit` with the nearest to its end."""
    tightest = min(standing, key=lambda s: (max(s.remaining, 0), -s.reset))
    remaining = max(tightest.remaining, 0)
    return {
        "RateLimit-Policy": ", ".join(s.policy.header() for s in standing),
        "RateLimit": f'"{tightest.policy.name}";r={remaining};t={tightest.reset}',
    }


def charge(req: falcon.Request, cost: int) -> None:
    """Count `cost` more against the request (a sync run's jobs, beyond the request's own)."""
    quotas: Quotas | None = getattr(req.context, "quotas", None)
    if quotas is not None and cost > 0:
        quotas.charge(req, cost)


def build(settings: Settings) -> Quotas:
    """The app's quotas: counters in Redis when REDIS_URL is set."""
    client = None
    if settings.redis_url:
        import redis

        client = redis.Redis.from_url(
            settings.redis_url,
            socket_timeout=TIMEOUT_SECONDS,
            socket_connect_timeout=TIMEOUT_SECONDS,
        )
    return Quotas(Plans.of(settings), Counters(client))


class Limits:
    """Middleware: the app's quotas for `require_employer`, and the RateLimit headers on
    every keyed answer that was counted."""

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.quotas = self.quotas

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        standing: list[Standing] | None = getattr(req.context, "standing", None)
        if standing:
            for name, value in headers(standing).items():
                resp.set_header(name, value)
