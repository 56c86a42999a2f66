"""The pool of a one-process worker (`jobpost worker --concurrency 1`): Celery's solo pool,
which runs each task in the worker's own process, with Celery's time limits kept.

The prefork pool hands every task from the worker to a child process and the result back
(a pipe each way, two processes woken per task). With one child that buys isolation and
nothing else, at a cost measured in docs/benchmarks.md. What isolation gave is kept here, or
handed to the process supervisor:

- Time limits (`task_time_limit`, `task_soft_time_limit`). The solo pool ignores them; here
  an alarm raises SoftTimeLimitExceeded in the task at the soft limit, as prefork's child
  gets it, and ends the process at the hard limit (SIGALRM's default action, which works
  even if the task is stuck in C code), as prefork would end its child.
- A task that ends its process (the hard limit, a crash) ends the worker, not a child: the
  supervisor (Docker's restart policy, systemd, the Procfile platform) starts it again.
  Nothing is lost meanwhile: the unacknowledged message comes back from Redis after the
  visibility timeout, and the copy it was sending goes back through the sweeper once its
  lease runs out (C8).
- Remote control (`jobpost queues`' ping, Flower) is answered between tasks, so a worker in
  the middle of a slow send answers late.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from celery.concurrency import solo as celery_solo
from celery.concurrency.base import apply_target
from celery.exceptions import SoftTimeLimitExceeded


class TaskPool(celery_solo.TaskPool):  # type: ignore[misc]  # celery carries no type hints
    """Solo, with time limits: the task's own, else the worker's (`--time-limit`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_apply = self._apply

    def _apply(
        self,
        target: Callable[..., Any],
        args: Any = (),
        kwargs: Any = None,
        *,
        timeout: float | None = None,
        soft_timeout: float | None = None,
        **options: Any,
    ) -> Any:
        soft = soft_timeout or self.options.get("soft_timeout")
        hard = timeout or self.options.get("timeout")
        with time_limits(soft=soft, hard=hard):
            return apply_target(target, args, kwargs, **options)

    def _get_info(self) -> dict[str, Any]:
        info: dict[str, Any] = super()._get_info()
        info["timeouts"] = (self.options.get("soft_timeout"), self.options.get("timeout"))
        return info


@contextmanager
def time_limits(*, soft: float | None, hard: float | None) -> Iterator[None]:
    """In the main thread: raise SoftTimeLimitExceeded `soft` seconds in, end the process
    `hard` seconds in (a hard limit at or below the soft one wins, as with prefork)."""
    if soft and hard and soft >= hard:
        soft = None
    if not soft and not hard:
        yield
        return

    def expired(signum: int, frame: FrameType | None) -> None:
        if hard:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, hard - (soft or 0))
        raise SoftTimeLimitExceeded(f"soft time limit ({soft}s) exceeded")

    previous = signal.signal(signal.SIGALRM, expired if soft else signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, soft or hard or 0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
