"""C9 beat: the schedule is what the contract says, and `jobpost beat` really fires the tasks.

The static half checks beat_schedule.SCHEDULE against C9 and the Celery app. The slow half
starts `jobpost worker` and `jobpost beat` as processes against a private redis-server and a
committed SQLite database of the test's own, with JOBPOST_BEAT_EVERY_SECONDS=2 (every entry
every 2 s instead of its crontab, see workers.app.beat_schedule), and waits for an expired job to be
archived by the beat-sent `jobpost.expire`.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.beat import ScheduleEntry, Scheduler
from celery.schedules import crontab
from sqlalchemy import Engine, select

import workers.tasks  # declares the tasks: every app make_celery makes has them
from beat_schedule import SCHEDULE
from models import employers
from models.core.dates import today_in, utcnow
from models.core.settings import Settings
from models.db import heartbeats
from models.db.engines import make_engine
from models.db.entities import Job
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import copy_database
from tests.harness import Program, RedisServer, free_port, wait_for
from workers.app import MAINTENANCE_QUEUE, beat_schedule, make_celery

JOBPOST = Path(sys.executable).with_name("jobpost")
# The worker's JSON line for the run (C9; `jobpost worker` leaves out Celery's own).
EXPIRE_SUCCEEDED = re.compile(r'"event":"task".*"task":"jobpost\.expire".*"outcome":"succeeded"')
TORONTO = ZoneInfo("America/Toronto")
C9_TIMES = {  # task → (minutes, hours) of its crontab, in JOBPOST_TIMEZONE
    "jobpost.expire": ({5}, set(range(24))),
    "jobpost.refresh": ({15}, {0}),
    "jobpost.purge": ({0}, {3}),
    "jobpost.digests": ({0}, {7}),  # C19
}
EVERY_MINUTE = {
    "jobpost.sweep",
    "jobpost.notify_search_engines",
}  # an interval of real time, not a crontab (beat_schedule.py)


# --- the schedule (static) ---------------------------------------------------------------------


def test_every_scheduled_task_is_registered_and_routed_to_the_maintenance_queue(
    tmp_path: Path,
) -> None:
    celery_app = make_celery(Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}))
    assert workers.tasks.expire.name == "jobpost.expire"
    names = [entry["task"] for entry in SCHEDULE.values()]
    assert sorted(names) == sorted([*C9_TIMES, *EVERY_MINUTE])
    for name in names:
        assert name in celery_app.tasks, f"{name} is not a registered task"
        assert celery_app.amqp.router.route({}, name)["queue"].name == MAINTENANCE_QUEUE
    for entry in SCHEDULE.values():
        assert entry["options"]["queue"] == MAINTENANCE_QUEUE
    assert celery_app.conf.beat_schedule == beat_schedule(None) == SCHEDULE


@pytest.mark.parametrize("name", sorted(n for n, e in SCHEDULE.items() if e["task"] in C9_TIMES))
def test_the_crontab_times_are_the_c9_ones(name: str) -> None:
    """expire hourly at :05, refresh at 00:15, purge at 03:00 (C9), digests at 07:00 (C19)."""
    entry = SCHEDULE[name]
    schedule = entry["schedule"]
    assert isinstance(schedule, crontab)
    minutes, hours = C9_TIMES[entry["task"]]
    assert (schedule.minute, schedule.hour) == (minutes, hours)
    assert schedule.day_of_week == set(range(7)) and schedule.day_of_month == set(range(1, 32))
    assert schedule.month_of_year == set(range(1, 13))


def test_the_sweep_and_the_search_engine_notifications_run_every_minute() -> None:
    found = [e for e in SCHEDULE.values() if e["task"] in EVERY_MINUTE]
    assert len(found) == len(EVERY_MINUTE)
    assert all(entry["schedule"] == timedelta(minutes=1) for entry in found)


def test_the_celery_timezone_comes_from_jobpost_timezone() -> None:
    vancouver = make_celery(Settings.from_env({"JOBPOST_TIMEZONE": "America/Vancouver"}))
    assert vancouver.conf.timezone == "America/Vancouver"
    assert str(make_celery(Settings.from_env({})).conf.timezone) == "America/Toronto"


@pytest.mark.parametrize(
    ("zone", "due_at_utc"),
    [
        ("America/Toronto", datetime(2026, 3, 11, 4, 15, tzinfo=UTC)),  # 00:15 EDT
        ("America/Vancouver", datetime(2026, 3, 11, 7, 15, tzinfo=UTC)),
    ],  # 00:15 PDT
)
def test_refresh_fires_at_a_quarter_past_midnight_in_the_configured_zone(
    zone: str, due_at_utc: datetime
) -> None:
    """The crontab is read in JOBPOST_TIMEZONE, as beat reads it (an entry bound to the app)."""
    app = make_celery(Settings.from_env({"JOBPOST_TIMEZONE": zone}))
    entry = ScheduleEntry(
        name="refresh", app=app, **copy.deepcopy(SCHEDULE["refresh-auto-refresh-jobs"])
    )
    schedule = entry.schedule
    last_run = due_at_utc - timedelta(days=1)
    schedule.nowfun = lambda: due_at_utc - timedelta(seconds=1)
    assert not schedule.is_due(last_run).is_due
    schedule.nowfun = lambda: due_at_utc
    assert schedule.is_due(last_run).is_due


class Recorder(Scheduler):  # type: ignore[misc]  # celery carries no type hints
    """Celery's own beat Scheduler, recording what it would send instead of sending it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.fired: list[tuple[str, datetime]] = []
        super().__init__(*args, **kwargs)

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        self.fired.append((entry.task, self.app.now()))


def beat_fires(zone: str, start: datetime, hours: float) -> list[tuple[str, datetime]]:
    """Run beat's scheduler over `hours` of a fake clock starting at `start` (C9's schedule,
    in `zone`), sleeping as long as each tick asks; what it fires, in UTC."""
    app = make_celery(Settings.from_env({"JOBPOST_TIMEZONE": zone}))
    app.conf.beat_schedule = copy.deepcopy(SCHEDULE)  # the crontabs cache the app they see
    clock = [start.astimezone(UTC)]
    app.now = lambda: clock[0]
    beat = Recorder(app=app, max_interval=300)
    end = clock[0] + timedelta(hours=hours)
    while clock[0] < end:
        clock[0] += timedelta(seconds=max(beat.tick(), 0.001))
    return [(task, when.astimezone(UTC)) for task, when in beat.fired]


def local_times(fired: list[tuple[str, datetime]], task: str, zone: str) -> list[str]:
    return [f"{w.astimezone(ZoneInfo(zone)):%m-%d %H:%M%z}" for t, w in fired if t == task]


@pytest.mark.parametrize(
    ("zone", "start"),
    [
        ("America/Toronto", datetime(2026, 11, 1, 0, 30)),  # clocks fall back at 02:00 EDT
        ("America/Toronto", datetime(2026, 3, 8, 0, 30)),  # and spring forward at 02:00 EST
        ("America/St_Johns", datetime(2026, 11, 1, 0, 30)),
    ],
)
def test_the_sweep_runs_every_minute_through_a_change_of_clocks(zone: str, start: datetime) -> None:
    """Every minute of real time (C8, C9): the repeated hour of a fall back is no exception."""
    fired = beat_fires(zone, start.replace(tzinfo=ZoneInfo(zone)), hours=3)
    sweeps = [when for task, when in fired if task == "jobpost.sweep"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(sweeps)]
    assert len(sweeps) >= 3 * 60 - 1
    assert max(gaps) < timedelta(seconds=61)


def test_the_daily_tasks_run_once_at_their_local_time_across_both_changes_of_clocks() -> None:
    """Refresh at 00:15 and purge at 03:00 in JOBPOST_TIMEZONE, once a day, on the nights the
    clocks spring forward (8 March) and fall back (1 November); expire at :05 of each hour
    the clock shows (the 01:05 shown twice when falling back runs once, as cron does)."""
    zone = "America/Toronto"
    spring = beat_fires(zone, datetime(2026, 3, 7, 23, 0, tzinfo=TORONTO), hours=24)
    assert local_times(spring, "jobpost.refresh", zone) == ["03-08 00:15-0500"]
    assert local_times(spring, "jobpost.purge", zone) == ["03-08 03:00-0400"]
    expire = local_times(spring, "jobpost.expire", zone)
    assert expire[:5] == [
        "03-07 23:05-0500", "03-08 00:05-0500", "03-08 01:05-0500", "03-08 03:05-0400",
        "03-08 04:05-0400",
    ]  # fmt: skip
    autumn = beat_fires(zone, datetime(2026, 10, 31, 23, 0, tzinfo=TORONTO), hours=24)
    assert local_times(autumn, "jobpost.refresh", zone) == ["11-01 00:15-0400"]
    assert local_times(autumn, "jobpost.purge", zone) == ["11-01 03:00-0500"]
    expire = local_times(autumn, "jobpost.expire", zone)
    assert expire[:5] == [
        "10-31 23:05-0400", "11-01 00:05-0400", "11-01 01:05-0400", "11-01 02:05-0500",
        "11-01 03:05-0500",
    ]  # fmt: skip


def test_jobpost_beat_every_seconds_replaces_every_crontab(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"JOBPOST_BEAT_EVERY_SECONDS": "2", "JOBPOST_VAR_DIR": str(tmp_path)}
    )
    fast = make_celery(settings).conf.beat_schedule
    assert fast == beat_schedule(settings.beat_every_seconds)
    assert {name: entry["schedule"] for name, entry in fast.items()} == dict.fromkeys(SCHEDULE, 2.0)
    assert {n: (e["task"], e["options"]) for n, e in fast.items()} == {
        n: (e["task"], e["options"]) for n, e in SCHEDULE.items()
    }
    assert Settings.from_env({"JOBPOST_BEAT_EVERY_SECONDS": " "}).beat_every_seconds is None
    assert beat_schedule(None) is SCHEDULE
    for wrong in ("0", "-2", "soon"):
        with pytest.raises(ValueError, match=f"^JOBPOST_BEAT_EVERY_SECONDS='{wrong}': "):
            Settings.from_env({"JOBPOST_BEAT_EVERY_SECONDS": wrong})


# --- beat and a worker, for real ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_beat_fires_expire_and_a_worker_archives_the_expired_job(
    tmp_path: Path, redis_server: RedisServer, engine: Engine
) -> None:
    """On a committed copy of the suite's migrated SQLite database (the `engine` fixture)."""
    database = copy_database(engine, tmp_path / "jobpost.db")
    engine = make_engine(database)
    factory = make_sessionmaker(engine)
    today = today_in(TORONTO)
    with session_scope(factory) as s:
        employer = employers.create_employer(s, "Beat Ltd", "standard")
        expired = Job(
            employer_id=employer.id,
            title="Closed",
            search_text="closed",
            publish_date=today - timedelta(days=40),
            close_date=today - timedelta(days=3),
            status="active",
            position_type_id=1,
            description="<p>x</p>",
            routing_type=1,
            application_email="jobs@beat.test",
            updated_at=utcnow(),
        )
        open_job = Job(
            employer_id=employer.id,
            title="Open",
            search_text="open",
            publish_date=today - timedelta(days=1),
            close_date=today,
            status="active",
            position_type_id=1,
            description="<p>x</p>",
            routing_type=1,
            application_email="jobs@beat.test",
            updated_at=utcnow(),
        )
        s.add_all([expired, open_job])
    (tmp_path / "prometheus").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "SMTP_"))}
    env.update(
        DATABASE_URL=database,
        CELERY_BROKER_URL=redis_server.url,
        REDIS_URL=redis_server.url,
        JOBPOST_TIMEZONE="America/Toronto",
        JOBPOST_VAR_DIR=str(tmp_path / "var"),
        JOBPOST_BEAT_EVERY_SECONDS="2",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
        WORKER_METRICS_PORT=str(free_port()),
        SMTP_PORT=str(free_port()),  # nothing listens: no mail is due anyway
        PYTHONUNBUFFERED="1",
    )
    argv = {
        "worker": [str(JOBPOST), "worker", "--concurrency", "1"],
        "beat": [str(JOBPOST), "beat"],
    }
    procs: dict[str, Program] = {}
    try:
        for name in ("worker", "beat"):
            procs[name] = Program(argv[name], tmp_path / f"{name}.log", env=env, cwd=tmp_path)

        def expire_ran_and_archived() -> bool:
            for proc in procs.values():
                proc.alive()  # or the end of its log
            if not EXPIRE_SUCCEEDED.search(procs["worker"].text()):
                return False  # (jobpost.refresh may archive it first: it expires first, C5)
            with factory() as s:
                return s.scalar(select(Job.status).where(Job.id == expired.id)) == "archived"

        try:
            wait_for(expire_ran_and_archived, timeout=30, what="beat to fire jobpost.expire")
        except AssertionError as e:
            raise AssertionError(
                f"{e}\n--- beat\n{procs['beat'].text()}\n--- worker\n{procs['worker'].text()}"
            ) from None
    finally:
        for proc in procs.values():
            proc.stop()
        engine.dispose()

    assert "Sending due task expire-closed-jobs (jobpost.expire)" in procs["beat"].text()
    with factory() as s:  # a job is active through its close date (C5)
        assert s.scalar(select(Job.status).where(Job.id == open_job.id)) == "active"
        # and the run left its heartbeat, which /metrics shows (C9)
        assert "jobpost.expire" in heartbeats.last_successes(s)
