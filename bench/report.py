"""What a bench prints (one table, its targets) and writes (JSON under var/bench/)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    scenario: str
    rps: float
    p50_ms: float
    p99_ms: float
    ratio: float | None  # to the baseline's requests/s (None for the baseline itself)
    cpu_ms: float  # the server's CPU time per request
    failed: int  # non-2xx answers and socket errors
    db_cpu_ms: float | None = None  # the database's CPU time per request, where measured


@dataclass(frozen=True)
class Target:
    goal: str
    measured: str
    passed: bool


def table(rows: Sequence[Row], baseline: str) -> str:
    """A plain-text table whose last columns compare each scenario to the baseline."""
    head: tuple[str, ...] = (
        "scenario", "req/s", "p50 ms", "p99 ms", f"× {baseline}", "CPU ms/req", "failed"
    )  # fmt: skip
    body: list[tuple[str, ...]] = [
        (
            r.scenario,
            f"{r.rps:,.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            "baseline" if r.ratio is None else f"{r.ratio:.2f}",
            f"{r.cpu_ms:.2f}",
            f"{r.failed:,}",
        )
        for r in rows
    ]
    if any(r.db_cpu_ms is not None for r in rows):
        head = (*head[:-1], "DB CPU ms/req", head[-1])
        body = [
            (*b[:-1], "" if r.db_cpu_ms is None else f"{r.db_cpu_ms:.2f}", b[-1])
            for b, r in zip(body, rows, strict=True)
        ]
    return grid(head, body)


def grid(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A plain-text table of cells already formatted: the first column left-aligned (names),
    the others right-aligned (numbers)."""
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(head), rule, *(line(b) for b in body)])


def targets(items: Sequence[Target]) -> str:
    return "\n".join(f"{'PASS' if t.passed else 'FAIL'}  {t.goal}: {t.measured}" for t in items)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, date | datetime | Path):
        return str(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=_plain, ensure_ascii=False) + "\n")
