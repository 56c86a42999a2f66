"""Query plans of what the service really runs.

The SQL of a `models` call is captured as it runs; each statement is then executed again, as
the service's connections execute it once warm, with PostgreSQL's auto_explain sending the
plan of every execution back as a notice. That matters: psycopg prepares a statement
server-side from its 5th execution on a connection (`prepare_threshold`), and PostgreSQL plans
the first 5 executions of a prepared statement with its values (custom plans), then may keep
a generic plan that ignores them. A plain EXPLAIN ANALYZE only ever shows the custom plan.
A statement the service sends unprepared (`models.db.fast_reads.planned_for_values`) is run
unprepared.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.orm import Session

from models.db.engines import make_engine
from models.db.entities import Employer

RUNS = 8  # run 1 is planned with its values; from run 6 a generic plan may be used
AUTO_EXPLAIN = {
    "log_min_duration": "0",
    "log_analyze": "on",
    "log_buffers": "on",
    "log_level": "notice",  # to this client, not to the server's log
}


@dataclass(frozen=True)
class Plan:
    statement: str
    parameters: Any
    first_plan: str  # the first execution: planned with the parameters' values
    first_ms: float
    warm_plan: str  # the last of RUNS executions, as a warm worker runs it
    warm_ms: float

    @property
    def generic(self) -> bool:
        """Whether the warm plan is a generic one ($1, $2 … left in its conditions)."""
        return re.search(r"\$\d", self.warm_plan) is not None


def explain(
    database_url: str, employer_id: int, call: Callable[[Session, Employer], object]
) -> list[Plan]:
    """Run `call(session, employer)`, then re-run every statement it issued under auto_explain."""
    engine = make_engine(database_url)
    captured: list[tuple[str, Any, bool]] = []

    def capture(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        prepared = cursor.connection.prepare_threshold is not None
        captured.append((statement, parameters, prepared))

    try:
        with Session(engine) as session:
            employer = session.get_one(Employer, employer_id)  # not part of what is explained
            event.listen(engine, "before_cursor_execute", capture)
            try:
                call(session, employer)
            finally:
                event.remove(engine, "before_cursor_execute", capture)
        raw = engine.raw_connection()
        try:
            conn = raw.driver_connection
            assert isinstance(conn, psycopg.Connection)
            return [_runs(conn, *statement) for statement in captured]
        finally:
            raw.close()
    finally:
        engine.dispose()


def _runs(conn: psycopg.Connection[Any], statement: str, parameters: Any, prepared: bool) -> Plan:
    notices: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    conn.add_notice_handler(keep)
    try:
        conn.execute("LOAD 'auto_explain'")
        for name, value in AUTO_EXPLAIN.items():
            conn.execute(f"SET auto_explain.{name} = {value}")
        for _ in range(RUNS):
            conn.execute(statement, parameters, prepare=prepared).fetchall()
        conn.rollback()
    finally:
        conn.remove_notice_handler(keep)
    # Only the statement's own plans: planning may run a function's query too (migration
    # 0003's gram function, folded to a constant when the planner sees q).
    ours = statement.strip()[:60]
    plans = [_parse(n) for n in notices if n.startswith("duration:") and ours in n]
    if len(plans) != RUNS:
        raise RuntimeError(f"auto_explain reported {len(plans)} plans of {RUNS} runs")
    (first_ms, first), (warm_ms, warm) = plans[0], plans[-1]
    return Plan(statement, parameters, first, first_ms, warm, warm_ms)


def _parse(notice: str) -> tuple[float, str]:
    """auto_explain's message: the duration, the query text, then the plan (the first line
    with a cost estimate starts it)."""
    found = re.match(r"duration: ([0-9.]+) ms", notice)
    lines = notice.splitlines()
    start = next((i for i, line in enumerate(lines) if "(cost=" in line), len(lines))
    return float(found.group(1)) if found else 0.0, "\n".join(lines[start:])
