"""Every periodic task of C9 (expiry, refresh, sweep, purge) run twice changes nothing the second
time and logs what it changed; `jobpost tasks run … --today` is exercised on a committed SQLite
database of the module's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

import models.core.dates
import workers.tasks
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import OutboxEntry
from models.db.unit_of_work import make_sessionmaker
from tests.conftest import copy_database
from tests.models.upkeep_rows import (
    DAY,
    TODAY,
    TORONTO,
    add_application,
    add_job,
    employer_id,
    jobs_now,
    table_counts,
)
from tests.models.upkeep_rows import toronto as toronto
from workers.cli import main

# --- every task twice --------------------------------------------------------------------------


def seed_everything(sessions: sessionmaker[Session]) -> None:
    """Something for every task to do: expiry, refresh, purge and sweep."""
    unlimited = employer_id(sessions, "unlimited")
    for close in (TODAY - 2 * DAY, TODAY - DAY, TODAY, TODAY + DAY):
        for publish in (TODAY - 8 * DAY, TODAY - 7 * DAY, TODAY - 6 * DAY):
            add_job(sessions, unlimited, publish=publish, close=close, auto_refresh=True)
    job = add_job(sessions, unlimited)
    # 400 days old on TODAY, the service date the tasks are run for (purge counts from it).
    age = timedelta(days=400) + (models.core.dates.today_in(TORONTO) - TODAY)
    for delivery in ("sent", "failed", "pending"):
        add_application(sessions, job, age=age, delivery=delivery)
    with sessions() as s:
        for entry in s.scalars(select(OutboxEntry).where(OutboxEntry.status == "pending")):
            entry.enqueued_at = None
        s.commit()


def snapshot(sessions: sessionmaker[Session]) -> tuple[Any, ...]:
    with sessions() as s:
        return (
            jobs_now(sessions),
            table_counts(sessions),
            sorted(
                tuple(row)
                for row in s.execute(
                    select(OutboxEntry.application_id, OutboxEntry.status, OutboxEntry.enqueued_at)
                )
            ),
        )


@pytest.mark.parametrize(
    ("task", "first"), [("expire", 6), ("refresh", 4), ("purge", 2), ("sweep", 1)]
)
def test_each_task_run_twice_changes_nothing_the_second_time(
    sessions: sessionmaker[Session],
    toronto: Settings,
    enqueued: list[int],
    task: str,
    first: int,
) -> None:
    """Idempotent (C5, C8): the second run reports 0 and leaves every row as the first left it.
    Refresh expires first (6 jobs), then 4 of the jobs still open are due."""
    seed_everything(sessions)
    runner = workers.tasks.RUNNERS[task]
    assert runner(sessions, toronto, TODAY) == first
    once = snapshot(sessions)
    assert runner(sessions, toronto, TODAY) == 0
    assert snapshot(sessions) == once


def test_each_task_logs_what_it_changed(
    sessions: sessionmaker[Session],
    toronto: Settings,
    enqueued: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    seed_everything(sessions)
    caplog.set_level(logging.INFO, logger="jobpost.tasks")
    counts = {
        task: workers.tasks.RUNNERS[task](sessions, toronto, TODAY)
        for task in ("expire", "refresh", "purge", "sweep")
    }
    logged = [
        (r.periodic_task, r.changed)
        for r in caplog.records
        if hasattr(r, "periodic_task") and hasattr(r, "changed")
    ]
    assert counts == {"expire": 6, "refresh": 4, "purge": 2, "sweep": 1}
    # The refresh expires first, and logs that too: nothing is left to expire by then.
    assert logged == [
        ("expire", 6),
        ("expire", 0),
        ("refresh", 4),
        ("expiring", 0),  # no webhook endpoint listens (C12)
        ("purge", 2),
        ("sweep", 1),
    ]
    assert "expire: 6 active jobs closed before 2026-03-10 archived" in caplog.messages


# --- `jobpost tasks run … --today` (C9) --------------------------------------------------------


# The CLI tests run on a copy of the suite's migrated SQLite database (a file of their own,
# committed to by the command), so no test pays for a second migration.
ON_A_COPY = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


@pytest.fixture
def cli(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> Iterator[tuple[sessionmaker[Session], Callable[..., Any]]]:
    """The copy's sessions, and `run(*argv)` → (exit status, parsed --json output)."""
    url = copy_database(engine, tmp_path / "jobpost.db")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("JOBPOST_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("JOBPOST_TIMEZONE", "America/Toronto")
    copy_engine = make_engine(url)

    def run(*argv: str) -> tuple[int, Any]:
        capsys.readouterr()
        status = main(["tasks", "run", *argv, "--json"])
        printed = capsys.readouterr().out.strip()
        return status, orjson.loads(printed) if printed else None

    yield make_sessionmaker(copy_engine), run
    copy_engine.dispose()


@ON_A_COPY
def test_cli_tasks_run_expire_today_honours_the_boundary(cli: Any) -> None:
    factory, run = cli
    owner = employer_id(factory, "standard")
    closes_10th = add_job(factory, owner, close=date(2026, 3, 10))
    closes_9th = add_job(factory, owner, close=date(2026, 3, 9))

    assert run("expire", "--today", "2026-03-10") == (0, {"task": "expire", "changed": 1})
    states = jobs_now(factory)
    assert (states[closes_10th][0], states[closes_9th][0]) == ("active", "archived")

    assert run("expire", "--today", "2026-03-11") == (0, {"task": "expire", "changed": 1})
    assert jobs_now(factory)[closes_10th][0] == "archived"
    assert run("expire", "--today", "2026-03-11") == (0, {"task": "expire", "changed": 0})


@ON_A_COPY
def test_cli_tasks_run_refresh_expires_first_and_counts_the_refreshed(cli: Any) -> None:
    factory, run = cli
    unlimited = employer_id(factory, "unlimited")
    publish = date(2026, 3, 1)
    past_close = add_job(
        factory, unlimited, publish=publish, close=date(2026, 3, 9), auto_refresh=True
    )
    open_job = add_job(
        factory, unlimited, publish=publish, close=date(2026, 4, 30), auto_refresh=True
    )

    assert run("refresh", "--today", "2026-03-10") == (0, {"task": "refresh", "changed": 1})
    states = jobs_now(factory)
    assert states[past_close] == ("archived", publish, date(2026, 3, 9), True)
    assert states[open_job] == ("active", date(2026, 3, 10), date(2026, 4, 30), True)
    assert run("refresh", "--today", "2026-03-10") == (0, {"task": "refresh", "changed": 0})


@ON_A_COPY
@pytest.mark.parametrize("task", ["sweep", "purge"])
def test_cli_tasks_run_sweep_and_purge_print_their_counts(cli: Any, task: str) -> None:
    _factory, run = cli
    assert run(task, "--today", "2026-03-10") == (0, {"task": task, "changed": 0})


@ON_A_COPY
def test_cli_tasks_run_purge_today_sets_the_service_date(cli: Any) -> None:
    """C9: `--today` sets the service date; 150 days on, a month-old finished application is
    past the 180 days of retention."""
    factory, run = cli
    job = add_job(factory, employer_id(factory, "standard"))
    add_application(factory, job, age=timedelta(days=40), delivery="sent")
    today = models.core.dates.today_in(TORONTO)

    later = (today + 150 * DAY).isoformat()
    assert run("purge", "--today", today.isoformat()) == (0, {"task": "purge", "changed": 0})
    assert run("purge", "--today", later) == (0, {"task": "purge", "changed": 1})
    assert table_counts(factory) == {"applications": 0, "resumes": 0, "outbox": 0}


@ON_A_COPY
def test_cli_tasks_run_prints_the_count_for_people_too(cli: Any, capsys: Any) -> None:
    factory, _run = cli
    add_job(factory, employer_id(factory, "standard"), close=date(2026, 3, 9))
    assert main(["tasks", "run", "expire", "--today", "2026-03-10"]) == 0
    assert capsys.readouterr().out.strip() == "expire: 1 changed"


@ON_A_COPY
@pytest.mark.parametrize(
    "day",
    [
        "10/03/2026",
        "20260310",  # ISO 8601's basic format: date.fromisoformat takes it since Python 3.11
        "2026-W11-2",  # an ISO week date, taken as well
        "2026-03-32",
        "2026-3-10",
        "2026-03-10T00:00",
        " 2026-03-10",
        "２０２６-03-10",  # digits, but not ASCII ones
        "0001-01-01",  # a real date, but refresh's 7 days back would be none
        "9999-12-31",  # and purge's instant of that day, in Toronto, would be past any
    ],
)
def test_cli_tasks_run_refuses_a_malformed_date_as_a_usage_error(
    cli: Any, capsys: Any, day: str
) -> None:
    """C9: `--today YYYY-MM-DD`; anything else is exit status 2, and nothing runs."""
    factory, _run = cli
    job = add_job(factory, employer_id(factory, "standard"), close=date(2026, 3, 9))
    with pytest.raises(SystemExit) as exit_info:
        main(["tasks", "run", "expire", "--today", day])
    assert exit_info.value.code == 2
    assert "--today" in capsys.readouterr().err
    assert jobs_now(factory)[job][0] == "active"  # past its close date, but nothing ran
