"""C9: each periodic task's last success is in the database and on the web's /metrics, so a
beat that stops firing shows (deploy/prometheus/alerts.yml, JobpostBeatSilent); and every
/metrics says which build answers (`jobpost_build_info`).

The tasks run as a worker runs them (Celery's `apply`, in this process), on the suite's
database of each backend; the scrape is the web app's."""

from __future__ import annotations

import platform
import time
from importlib import metadata
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session, sessionmaker

import workers.tasks  # noqa: F401  (declares the tasks: every app make_celery makes has them)
from beat_schedule import SCHEDULE
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db import heartbeats
from tests.api.test_observability import build, samples, scrape
from workers.app import make_celery
from workers.observability import metrics_registry

GAUGE = "jobpost_periodic_task_last_success_timestamp_seconds"
BEAT_TASKS = sorted({entry["task"] for entry in SCHEDULE.values()})


def run(celery: Any, task: str) -> None:
    result = celery.tasks[task].apply()
    assert result.successful(), result.traceback


@pytest.mark.parametrize("task", BEAT_TASKS)
def test_a_periodic_task_that_succeeds_shows_when_on_metrics(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, task: str
) -> None:
    api = build(settings, sessions, clock)
    celery = make_celery(settings, sessions=sessions)
    try:
        assert samples(scrape(api), GAUGE) == {}  # never succeeded: no series yet
        before = time.time()
        run(celery, task)
        after = time.time()
        first = samples(scrape(api), GAUGE)
        assert list(first) == [(("task", task),)]
        assert before - 1 <= first[(("task", task),)] <= after + 1
        run(celery, task)
        again = samples(scrape(api), GAUGE)[(("task", task),)]
        assert again >= first[(("task", task),)]
    finally:
        celery.close()


def test_every_beat_entry_has_its_own_heartbeat(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    celery = make_celery(settings, sessions=sessions)
    try:
        for task in BEAT_TASKS:
            run(celery, task)
    finally:
        celery.close()
    beats = samples(scrape(build(settings, sessions, clock)), GAUGE)
    assert sorted(dict(labels)["task"] for labels in beats) == BEAT_TASKS


def test_an_earlier_success_never_moves_a_heartbeat_back(sessions: sessionmaker[Session]) -> None:
    """Two runs that overlap (a manual run beside the beat's) finish in either order."""
    now = utcnow()
    with sessions() as s:
        heartbeats.beat(s, "jobpost.sweep", now=now)
        heartbeats.beat(s, "jobpost.sweep", now=now.replace(year=now.year - 1))
        s.commit()
        assert heartbeats.last_successes(s) == {"jobpost.sweep": now}


def build_labels() -> dict[str, str]:
    return {"version": metadata.version("jobpost"), "python": platform.python_version()}


def test_the_web_metrics_say_which_build_answers(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    text = scrape(build(settings, sessions, clock))
    assert samples(text, "jobpost_build_info") == {tuple(sorted(build_labels().items())): 1}


def test_the_worker_metrics_say_which_build_answers() -> None:
    text = generate_latest(metrics_registry()).decode()
    assert samples(text, "jobpost_build_info") == {tuple(sorted(build_labels().items())): 1}
    families = {family.name for family in text_string_to_metric_families(text)}
    assert "jobpost_tasks" in families  # the task counts, as before
