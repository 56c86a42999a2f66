"""Resident memory while something runs: sampled in a thread, the highest kept.

A worker's pool children come and go, so what is measured is a function called at each sample
(`server.tree_rss_bytes` of the worker, say) rather than a fixed list of processes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self


class Peak:
    """`measure()` (bytes) every `every` seconds from `with` to its end, in a thread of its
    own; `highest` is the most seen (a sample is also taken at the start and at the end)."""

    def __init__(self, measure: Callable[[], int], every: float = 0.1) -> None:
        self.measure, self.every = measure, every
        self.samples: list[int] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="memory-peak")

    @property
    def highest(self) -> int:
        return max(self.samples, default=0)

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            self.samples.append(self.measure())

    def __enter__(self) -> Self:
        self.samples.append(self.measure())
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join()
        self.samples.append(self.measure())


def high_water_bytes(pid: int) -> int | None:
    """The most resident memory process `pid` has held since it started (VmHWM): unlike a
    sample, it cannot miss a short peak. None when the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    return None
