"""APPLY_RATE_LIMIT per client address (C8): a fixed window, shared through Redis when
REDIS_URL is set, else per process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from models.core.settings import rate_limit


class Limiter(Protocol):
    def hit(self, key: str) -> int | None:
        """Count one request; None if allowed, else seconds until the window ends."""


class Unlimited:
    def hit(self, key: str) -> int | None:
        return None


class MemoryLimiter:
    def __init__(self, limit: int, period: int, clock: Callable[[], float] = time.time) -> None:
        self.limit, self.period, self.clock = limit, period, clock
        self.window = -1
        self.counts: dict[str, int] = {}  # for the current window only
        self.lock = threading.Lock()

    def hit(self, key: str) -> int | None:
        now = self.clock()
        window = int(now // self.period)
        with self.lock:
            if window != self.window:
                self.window, self.counts = window, {}
            n = self.counts[key] = self.counts.get(key, 0) + 1
        return None if n <= self.limit else _retry_after(now, window, self.period)


class RedisLimiter:
    def __init__(
        self, client: Any, limit: int, period: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.client, self.limit, self.period, self.clock = client, limit, period, clock

    def hit(self, key: str) -> int | None:
        now = self.clock()
        window = int(now // self.period)
        name = f"jobpost:apply:{key}:{window}"
        try:
            pipe = self.client.pipeline()
            pipe.incr(name)
            pipe.expire(name, self.period + 1)
            n = int(pipe.execute()[0])
        except Exception:  # a limiter that is down must not turn applicants away
            return None
        return None if n <= self.limit else _retry_after(now, window, self.period)


def _retry_after(now: float, window: int, period: int) -> int:
    return max(1, int((window + 1) * period - now + 0.999))


# A healthy Redis answers the count within a millisecond. A silent one is waited for this
# long, then the applicant goes through: with the enqueue's wait (workers.app
# ENQUEUE_TIMEOUT), a POST is held about 0.2 s (C8) when Redis hangs or is away.
TIMEOUT_SECONDS = 0.05


def build(rule: str, redis_url: str | None) -> Limiter:
    parsed = rate_limit(rule)
    if parsed is None:
        return Unlimited()
    if redis_url:
        import redis

        client = redis.Redis.from_url(
            redis_url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        return RedisLimiter(client, *parsed)
    return MemoryLimiter(*parsed)
