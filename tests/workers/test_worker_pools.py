"""C12's delivery engine: every worker pool (solo, prefork, threads) keeps every guarantee of C8,
with a hanging relay, a warm shutdown and a worker killed mid-send. Real `celery worker`
processes, brokers, databases and SMTP servers: the stacks of tests/workers/stacks.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness import wait_for
from tests.workers.processes import SinkServer, SlowSink
from tests.workers.stacks import (
    MAIN_STACKS,
    REDIS_POSTGRES,
    Entry,
    Stack,
    all_in,
    apply,
    entries,
    entry,
    message_id,
    open_job,
    task_runs,
)
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers.app import prefetch_multiplier, worker_pool

pytestmark = pytest.mark.slow


# --- the delivery engine: every pool keeps every guarantee of C8 (C12) ------------------------

EVERY_POOL = ["solo", "prefork", "threads"]


def concurrency_of(pool: str) -> int:
    return 1 if pool == "solo" else 4


class PoolSink(SlowSink):
    """A relay taking `delay` seconds over each DATA (`stall` over the first one instead),
    noting how many it held at once."""

    def __init__(self, host: str, port: int, delay: float = 0.0, stall: float = 0.0) -> None:
        super().__init__(host, port, delay)
        self.stall = stall
        self.data_started = 0
        self.in_data = 0
        self.most_at_once = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.data_started += 1
        self.in_data += 1
        self.most_at_once = max(self.most_at_once, self.in_data)
        try:
            stall, self.stall = self.stall, 0.0
            if stall:
                await asyncio.sleep(stall)
            return await super().handle_DATA(server, session, envelope)
        finally:
            self.in_data -= 1


@contextlib.contextmanager
def pool_sink(delay: float = 0.0, stall: float = 0.0) -> Iterator[tuple[SinkServer, PoolSink]]:
    server = SinkServer()
    server.sink = sink = PoolSink("127.0.0.1", server.port, delay, stall)
    server.start()
    try:
        yield server, sink
    finally:
        server.stop()


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_each_pool_delivers_every_copy_once_and_quits_its_connections_when_stopped(
    stack: Stack, pool: str
) -> None:
    concurrency = concurrency_of(pool)
    with pool_sink(delay=0.3) as (server, received):
        ids = apply(stack, open_job(stack), 12)
        worker = stack.start_worker(server.port, concurrency=concurrency, pool=pool)
        for app_id in ids:
            stack.enqueue(app_id)
        wait_for(lambda: all_in(stack, ids, "sent"), timeout=90, what="every copy sent")
        assert sorted(received.message_ids()) == sorted(message_id(i) for i in ids)
        assert {e.attempts for e in entries(stack, ids).values()} == {1}
        assert 1 <= received.ehlo_count <= concurrency  # a connection per thread or process
        if concurrency > 1:
            assert received.most_at_once > 1, "the sends did not overlap"
        worker.stop(timeout=30)
        assert worker.proc.returncode == 0
        assert received.quit_count == received.ehlo_count


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_hanging_relay_is_given_up_at_the_deadline_and_retried(
    stack: Stack, pool: str
) -> None:
    """The relay holds the first DATA far past the deadline (0.8 of OUTBOX_LEASE_SECONDS=3)
    and far below the task time limits (240 s): the task gives up by itself, the copy is due
    again and sent once; the held one is never accepted."""
    with pool_sink(stall=60) as (server, received):
        [app_id] = apply(stack, open_job(stack))
        worker = stack.start_worker(server.port, concurrency=concurrency_of(pool), pool=pool)
        stack.enqueue(app_id)
        wait_for(
            lambda: entry(stack, app_id).status == "sent",
            timeout=60,
            what="the copy sent on a second attempt",
            every=stack.sweep,
        )
        assert received.message_ids() == [message_id(app_id)]
        assert entry(stack, app_id).attempts == 2
        assert worker.alive()
        assert "the send's deadline passed" in worker.text()
        # The first attempt gave up, and recorded its retry, before its lease ran out (a
        # task the sweeper also enqueued meanwhile finds the copy claimed: "skipped").
        retried = [took for took, result in task_runs(worker) if result == "retry"]
        assert len(retried) == 1 and retried[0] < stack.settings.outbox_lease_seconds


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_warm_shutdown_mid_send_finishes_and_records_the_send(
    stack: Stack, pool: str
) -> None:
    with pool_sink(delay=1.0) as (server, received):
        [app_id] = apply(stack, open_job(stack))
        worker = stack.start_worker(server.port, concurrency=concurrency_of(pool), pool=pool)
        stack.enqueue(app_id)
        wait_for(lambda: received.data_started, timeout=30, what="the relay to hold DATA")
        worker.stop(timeout=30)  # SIGTERM: Celery's warm shutdown
        assert worker.proc.returncode == 0, "the worker did not end by itself"
        assert entry(stack, app_id) == Entry("sent", 1, None, entry(stack, app_id).job_id)
        assert received.message_ids() == [message_id(app_id)]
        assert received.quit_count == received.ehlo_count == 1


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_worker_killed_mid_send_hands_the_copy_on_after_the_lease(
    stack: Stack, pool: str
) -> None:
    """SIGKILL to the worker's group while the relay holds DATA: nothing records the send;
    once the lease has run out the sweeper hands the copy to a new worker. The relay may
    have accepted the first one all the same: the crash window, with the same Message-ID."""
    with pool_sink(delay=1.0) as (server, received):
        [app_id] = apply(stack, open_job(stack))
        first = stack.start_worker(server.port, concurrency=concurrency_of(pool), pool=pool)
        stack.enqueue(app_id)
        wait_for(lambda: received.data_started, timeout=30, what="the relay to hold DATA")
        first.kill()
        killed_at = time.monotonic()
        assert entry(stack, app_id).status == "sending"
        stack.start_worker(server.port, concurrency=concurrency_of(pool), pool=pool)
        wait_for(
            lambda: entry(stack, app_id).status == "sent",
            timeout=60,
            what="the copy sent by the second worker",
            every=stack.sweep,
        )
        assert time.monotonic() - killed_at > 1.5  # not before the lease (3 s from the claim)
        assert entry(stack, app_id).attempts == 2
        assert 1 <= len(received.message_ids()) <= 2
        assert set(received.message_ids()) == {message_id(app_id)}


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_warm_shutdown_hands_back_the_reserved_tasks_unclaimed(
    stack: Stack, pool: str
) -> None:
    """A threads worker reserves two tasks per thread (workers.app.prefetch_multiplier), the
    other pools one. While the relay holds every running send, the reserved rest wait
    unacknowledged in Redis, unclaimed; a warm shutdown finishes and records the running
    sends and hands the rest back to the queue, and a second worker sends them: every copy
    once, none claimed twice."""
    import redis

    assert stack.redis is not None
    concurrency = concurrency_of(pool)
    reserved = concurrency * prefetch_multiplier(pool)
    client = redis.Redis.from_url(stack.redis.url)
    with pool_sink(delay=1.5) as (server, received):
        ids = apply(stack, open_job(stack), concurrency * 3)
        for app_id in ids:
            stack.enqueue(app_id)
        first = stack.start_worker(server.port, concurrency=concurrency, pool=pool)
        seen: list[tuple[int, int]] = []

        def held() -> bool:
            seen.append((received.in_data, client.hlen("unacked")))
            return seen[-1] == (concurrency, reserved)

        what = f"{concurrency} sends held by the relay, {reserved} tasks reserved"
        try:
            wait_for(held, timeout=30, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}; (held, reserved) last seen: {sorted(set(seen))}") from None
        assert sum(e.status == "sending" for e in entries(stack, ids).values()) == concurrency
        first.stop(timeout=30)  # SIGTERM: Celery's warm shutdown
        assert first.proc.returncode == 0
        assert sum(e.status == "sent" for e in entries(stack, ids).values()) == concurrency
        assert client.hlen("unacked") == 0  # handed back, none kept for the visibility timeout
        assert client.llen("email") == len(ids) - concurrency
        stack.start_worker(server.port, concurrency=concurrency, pool=pool)
        wait_for(lambda: all_in(stack, ids, "sent"), timeout=90, what="every copy sent")
    client.close()
    assert sorted(received.message_ids()) == sorted(message_id(i) for i in ids)
    assert {e.attempts for e in entries(stack, ids).values()} == {1}


def test_only_a_threads_worker_reserves_more_than_it_runs() -> None:
    assert prefetch_multiplier(worker_pool(4, "threads")) == 2
    assert prefetch_multiplier(worker_pool(4)) == prefetch_multiplier(worker_pool(1)) == 1
