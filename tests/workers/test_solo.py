"""workers.solo: the pool of a one-process worker keeps Celery's time limits (the real
worker process is in test_worker_mid_send: a stalled send cut off at the soft limit)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from celery.concurrency import get_implementation
from celery.exceptions import SoftTimeLimitExceeded

from tests.harness import ROOT
from workers import solo
from workers.app import ONE_PROCESS_POOL, worker_pool


@pytest.fixture
def quiet() -> Iterator[socket.socket]:
    """A socket nothing is ever written to: reading it blocks until interrupted."""
    a, b = socket.socketpair()
    with a, b:
        yield a


def alarm_left() -> tuple[float, float]:
    return signal.getitimer(signal.ITIMER_REAL)


def test_one_process_runs_its_tasks_itself_and_several_fork() -> None:
    assert worker_pool(1) == ONE_PROCESS_POOL
    assert get_implementation(ONE_PROCESS_POOL) is solo.TaskPool
    assert worker_pool(2) == worker_pool(8) == "prefork"


def test_a_pool_asked_for_is_kept_and_an_unknown_one_refused() -> None:
    assert worker_pool(16, "threads") == "threads"
    assert worker_pool(1, "prefork") == "prefork"
    assert worker_pool(1, "solo") == ONE_PROCESS_POOL
    with pytest.raises(ValueError, match="unknown pool 'gevent'"):
        worker_pool(4, "gevent")


def test_the_soft_limit_interrupts_a_blocking_read_and_leaves_nothing_armed(
    quiet: socket.socket,
) -> None:
    before = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    with pytest.raises(SoftTimeLimitExceeded), solo.time_limits(soft=0.2, hard=5):
        quiet.recv(1)
    assert 0.15 < time.monotonic() - started < 2
    assert alarm_left() == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_task_done_in_time_is_left_alone() -> None:
    with solo.time_limits(soft=0.2, hard=0.4):
        pass
    assert alarm_left() == (0.0, 0.0)
    time.sleep(0.5)  # no alarm fires later
    with solo.time_limits(soft=None, hard=None):
        assert alarm_left() == (0.0, 0.0)


def test_the_pool_applies_the_task_limits_else_its_own(quiet: socket.socket) -> None:
    pool = solo.TaskPool(limit=1, soft_timeout=0.2, timeout=5)
    with pytest.raises(SoftTimeLimitExceeded):
        pool.apply_async(quiet.recv, args=(1,))  # the worker's --soft-time-limit
    with pytest.raises(SoftTimeLimitExceeded):
        pool.apply_async(quiet.recv, args=(1,), soft_timeout=0.1, timeout=0.5)  # the task's
    results: list[object] = []
    pool.apply_async(lambda: "done", callback=results.append, soft_timeout=0.1, timeout=0.5)
    assert results == ["done"] and alarm_left() == (0.0, 0.0)


def ended_by(script: str) -> tuple[int, float, str]:
    """Run `script` in a process of its own: its exit status, duration and output."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    return done.returncode, time.monotonic() - started, done.stdout + done.stderr


STUBBORN = """
import time
from celery.exceptions import SoftTimeLimitExceeded
from workers.solo import time_limits
with time_limits(soft={soft}, hard={hard}):
    try:
        time.sleep(10)
    except SoftTimeLimitExceeded:
        print("soft limit", flush=True)
        time.sleep(10)  # a task that carries on regardless
print("still running")
"""


def test_the_hard_limit_ends_the_process_even_past_a_swallowed_soft_limit() -> None:
    status, seconds, output = ended_by(STUBBORN.format(soft=0.3, hard=1))
    assert status == -signal.SIGALRM, output
    assert output.strip() == "soft limit" and seconds < 5


def test_a_hard_limit_at_or_below_the_soft_one_comes_first() -> None:
    status, seconds, output = ended_by(STUBBORN.format(soft=5, hard=0.3))
    assert status == -signal.SIGALRM, output
    assert output.strip() == "" and seconds < 4
