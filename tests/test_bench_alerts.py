"""The alerts bench's pieces work on both databases at a tiny size (`python -m bench alerts`
times them over the seeded million; nothing here is timed): its searches are distinct, the
planning it measures queues one digest per alert with a new job and nothing the second time,
and it deletes the alerts it made."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from bench import alerts
from bench.options import Options
from models import employers
from models.alerts import filters as alert_filters
from models.core.dates import today_in
from models.db.entities import AlertSubscription
from models.db.unit_of_work import session_scope
from models.jobs import writes as jobs
from tests.factories import job_body


def test_the_searches_are_distinct_and_as_many_as_asked() -> None:
    made = alerts.searches(alerts.SEARCHES)
    assert len(set(made)) == alerts.SEARCHES
    assert all(alert_filters.to_query(alert_filters.from_query(s)) == s for s in made)


def test_the_planning_it_measures_queues_a_digest_per_alert_with_a_new_job(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    today = today_in(ZoneInfo("America/Toronto"))
    with session_scope(sessions) as session:
        owner = employers.create_employer(session, "Maple Corp")
        for title in ("Senior Developer", "Payroll Clerk", "Kitchen Manager"):
            jobs.create(session, owner, job_body(title=title, status="active"), today=today)
    words = [alert_filters.from_query(s).q for s in alerts.searches(40)]
    assert {"developer", "clerk", "manager"} <= set(words)
    result = alerts.measure(sessions, 400, 40, new_every=1)
    # 400 alerts over 40 searches, 10 each: at least those of the three words have a new job.
    assert result.queued == result.expected >= 30
    assert result.again_queued == 0 and result.searches == 40
    with session_scope(sessions) as session:
        assert session.scalar(select(func.count()).select_from(AlertSubscription)) == 0
    options = dataclasses.replace(Options.defaults(), out_dir=tmp_path)
    assert alerts.show(options, dataclasses.replace(result, seconds=1.0, peak_rss=1))
    assert (tmp_path / "alerts.json").is_file()
