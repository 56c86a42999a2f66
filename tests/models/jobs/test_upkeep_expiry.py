"""C5 expiry, auto-refresh and re-publishing, as the periodic tasks of C9 run them.

In-process on both backends (the `sessions` fixture: each test's writes are rolled back). Each
task is called the way its Celery task calls it (`workers.tasks.run_*`), and the count it returns
is checked against the rows that really changed; the service date is Toronto's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

import models.core.dates
from models import employers
from models.core.settings import Settings
from models.db.entities import Employer, Job
from models.jobs import upkeep
from tests.factories import JOBS, create_job
from tests.models.upkeep_rows import (
    DAY,
    JUST_AFTER_MIDNIGHT_UTC,
    TODAY,
    TORONTO,
    add_job,
    employer_id,
    jobs_now,
    with_zone,
)
from tests.models.upkeep_rows import at_instant as at_instant
from tests.models.upkeep_rows import toronto as toronto
from workers.app import make_celery
from workers.tasks import run_expire, run_refresh

# --- expiry (C5) -------------------------------------------------------------------------------


def test_expire_archives_active_jobs_closed_before_today_and_nothing_else(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    """A job is active through its closeDate; drafts and archived jobs are never touched."""
    owner = employer_id(sessions, "standard")
    closes_today = add_job(sessions, owner, close=TODAY)
    closed_yesterday = add_job(sessions, owner, close=TODAY - DAY)
    closed_long_ago = add_job(sessions, owner, close=TODAY - 90 * DAY)
    closes_tomorrow = add_job(sessions, owner, close=TODAY + DAY)
    draft = add_job(sessions, owner, status="draft", close=TODAY - DAY)
    archived = add_job(sessions, owner, status="archived", close=TODAY - DAY)
    before = jobs_now(sessions)

    assert run_expire(sessions, toronto, TODAY) == 2

    after = jobs_now(sessions)
    assert after[closes_today][0] == "active"
    assert after[closes_tomorrow][0] == "active"
    assert after[closed_yesterday][0] == "archived"
    assert after[closed_long_ago][0] == "archived"
    assert after[draft] == before[draft] and after[archived] == before[archived]
    # Expiry changes the status only: both dates stay as they were.
    for job in (closed_yesterday, closed_long_ago):
        assert after[job][1:] == before[job][1:]


def test_a_job_closing_today_is_archived_the_day_after(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    job = add_job(sessions, employer_id(sessions, "standard"), close=TODAY)
    assert run_expire(sessions, toronto, TODAY) == 0
    assert jobs_now(sessions)[job][0] == "active"
    assert run_expire(sessions, toronto, TODAY + DAY) == 1
    assert jobs_now(sessions)[job][0] == "archived"


@pytest.mark.parametrize(
    ("instant", "service_date"),
    [
        (JUST_AFTER_MIDNIGHT_UTC, date(2026, 3, 10)),
        (datetime(2026, 3, 11, 3, 59, 59, tzinfo=UTC), date(2026, 3, 10)),  # EDT, UTC-4
        (datetime(2026, 3, 11, 4, 0, tzinfo=UTC), date(2026, 3, 11)),
        (datetime(2026, 1, 11, 4, 59, 59, tzinfo=UTC), date(2026, 1, 10)),  # EST, UTC-5
        (datetime(2026, 1, 11, 5, 0, tzinfo=UTC), date(2026, 1, 11)),
    ],
)
def test_the_service_date_is_the_calendar_date_in_toronto(
    instant: datetime, service_date: date
) -> None:
    assert models.core.dates.today_in(TORONTO, now=instant) == service_date


@pytest.mark.parametrize(
    ("day", "instant"),
    [
        (date(2026, 3, 10), JUST_AFTER_MIDNIGHT_UTC),  # the service date itself: unchanged
        (date(2026, 7, 1), datetime(2026, 7, 2, 3, 30, tzinfo=UTC)),  # EDT: 23:30 on 1 July
        (date(2026, 1, 5), datetime(2026, 1, 6, 4, 30, tzinfo=UTC)),  # EST: 23:30 on 5 January
    ],
)
def test_on_day_keeps_the_time_of_day_in_toronto(day: date, instant: datetime) -> None:
    """`--today` for purge (C9): 23:30 in Toronto on 10 March, moved to `day`, is 23:30 there."""
    moved = models.core.dates.on_day(TORONTO, day, JUST_AFTER_MIDNIGHT_UTC)
    assert moved == instant
    assert models.core.dates.today_in(TORONTO, now=moved) == day


def test_just_after_midnight_utc_a_job_closing_the_toronto_day_stays_active(
    sessions: sessionmaker[Session], settings: Settings, at_instant: Callable[[datetime], None]
) -> None:
    """03:30 UTC on 11 March is 23:30 on 10 March in Toronto: a job closing on the 10th is
    still open there. The task computes the date itself (no `today` passed), as beat runs it."""
    owner = employer_id(sessions, "standard")
    job = add_job(sessions, owner, close=date(2026, 3, 10))
    at_instant(JUST_AFTER_MIDNIGHT_UTC)
    assert models.core.dates.today_in(TORONTO, now=JUST_AFTER_MIDNIGHT_UTC) == date(2026, 3, 10)
    with sessions() as s:
        assert upkeep.expire(s, today=models.core.dates.today_in(TORONTO)) == 0

    assert run_expire(sessions, with_zone(settings, "America/Toronto")) == 0
    assert jobs_now(sessions)[job][0] == "active"

    # The same instant in a zone where the 11th has begun: the job is past its close date.
    assert run_expire(sessions, with_zone(settings, "UTC")) == 1
    assert jobs_now(sessions)[job][0] == "archived"


def test_expire_archives_once_midnight_comes_in_toronto(
    sessions: sessionmaker[Session], toronto: Settings, at_instant: Callable[[datetime], None]
) -> None:
    job = add_job(sessions, employer_id(sessions, "standard"), close=date(2026, 3, 10))
    at_instant(datetime(2026, 3, 11, 3, 59, 59, tzinfo=UTC))
    assert run_expire(sessions, toronto) == 0
    at_instant(datetime(2026, 3, 11, 4, 0, tzinfo=UTC))
    assert run_expire(sessions, toronto) == 1
    assert jobs_now(sessions)[job][0] == "archived"


# --- auto-refresh (C5) -------------------------------------------------------------------------


def test_refresh_moves_publish_date_only_for_the_right_plan_status_flag_and_age(
    sessions: sessionmaker[Session], toronto: Settings
) -> None:
    unlimited = employer_id(sessions, "unlimited", "Unlimited Ltd")
    standard = employer_id(sessions, "standard", "Standard Ltd")
    close = TODAY + 20 * DAY
    seven_days = add_job(
        sessions, unlimited, publish=TODAY - 7 * DAY, close=close, auto_refresh=True
    )
    thirty_days = add_job(
        sessions, unlimited, publish=TODAY - 30 * DAY, close=close, auto_refresh=True
    )
    six_days = add_job(sessions, unlimited, publish=TODAY - 6 * DAY, close=close, auto_refresh=True)
    no_flag = add_job(sessions, unlimited, publish=TODAY - 7 * DAY, close=close)
    draft = add_job(sessions, unlimited, status="draft", publish=TODAY - 7 * DAY, auto_refresh=True)
    archived = add_job(
        sessions, unlimited, status="archived", publish=TODAY - 7 * DAY, auto_refresh=True
    )
    # Stored true (written before a downgrade, say), but the plan no longer allows it.
    standard_plan = add_job(sessions, standard, publish=TODAY - 7 * DAY, auto_refresh=True)
    before = jobs_now(sessions)

    assert run_refresh(sessions, toronto, TODAY) == 2

    after = jobs_now(sessions)
    for job in (seven_days, thirty_days):
        assert after[job] == ("active", TODAY, close, True)  # closeDate never moves
    for job in (six_days, no_flag, draft, archived, standard_plan):
        assert after[job] == before[job]


def test_a_downgraded_employer_keeps_its_stored_auto_refresh_but_is_not_refreshed(
    api: Any, sessions: sessionmaker[Session], make_employer: Any, clock: Any, toronto: Settings
) -> None:
    """autoRefresh true can only be written on the unlimited plan (C4); after a downgrade to
    standard the stored flag stays true, and refresh must still leave the job alone."""
    downgraded = make_employer("Was Unlimited", "unlimited")
    still_unlimited = make_employer("Still Unlimited", "unlimited")
    kept = create_job(api, downgraded, status="active", autoRefresh=True)
    control = create_job(api, still_unlimited, status="active", autoRefresh=True)
    with sessions() as s:
        employers.set_plan(s, downgraded.id, "standard")
        s.commit()
    with sessions() as s:
        stored = s.get(Job, kept["id"])
        assert stored is not None and stored.auto_refresh is True
        assert s.get(Employer, downgraded.id).plan == "standard"  # type: ignore[union-attr]

    week_later = clock.today + 7 * DAY
    assert run_refresh(sessions, toronto, week_later) == 1

    after = jobs_now(sessions)
    assert after[kept["id"]][1] == date.fromisoformat(kept["publishDate"])
    assert after[control["id"]][1] == week_later
    assert after[control["id"]][2] == date.fromisoformat(control["closeDate"])


def test_the_refresh_task_expires_first(
    sessions: sessionmaker[Session],
    toronto: Settings,
    at_instant: Callable[[datetime], None],
) -> None:
    """C5: expiry runs before refresh, so a job past its closeDate is archived, not refreshed.
    The Celery task body itself runs here, on the test's sessions and settings."""
    refresh = make_celery(toronto, sessions=sessions).tasks["jobpost.refresh"]
    at_instant(JUST_AFTER_MIDNIGHT_UTC)  # 10 March in Toronto
    unlimited = employer_id(sessions, "unlimited")
    past_close = add_job(
        sessions, unlimited, publish=TODAY - 20 * DAY, close=TODAY - DAY, auto_refresh=True
    )
    due = add_job(sessions, unlimited, publish=TODAY - 20 * DAY, close=TODAY, auto_refresh=True)

    assert refresh() == 1

    after = jobs_now(sessions)
    assert after[past_close] == ("archived", TODAY - 20 * DAY, TODAY - DAY, True)
    assert after[due] == ("active", TODAY, TODAY, True)


# --- re-publishing (C5) and the tasks ----------------------------------------------------------


def test_an_expired_job_republished_gets_a_new_publish_date_and_a_valid_close_date(
    api: Any, sessions: sessionmaker[Session], employer: Any, clock: Any, toronto: Settings
) -> None:
    """archived (by expiry) → active by PUT: publishDate is today, the past closeDate becomes
    today + 60, and the next expiry leaves the job alone."""
    job = create_job(api, employer, status="active", closeDate="2026-03-20")
    clock.today = date(2026, 4, 2)
    assert run_expire(sessions, toronto, clock.today) == 1
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json["status"] == "archived"

    result = api.put(f"{JOBS}/{job['id']}", json={"status": "active"}, key=employer.key)

    assert result.status_code == 200, result.text
    assert result.json["status"] == "active"
    assert result.json["publishDate"] == "2026-04-02"
    assert result.json["closeDate"] == "2026-06-01"  # today + 60
    assert run_expire(sessions, toronto, clock.today) == 0
    assert jobs_now(sessions)[job["id"]] == ("active", date(2026, 4, 2), date(2026, 6, 1), False)


def test_a_republished_job_with_an_open_close_date_keeps_it(
    api: Any, sessions: sessionmaker[Session], employer: Any, clock: Any
) -> None:
    job = create_job(api, employer, status="active", closeDate="2026-04-30")
    assert (
        api.put(f"{JOBS}/{job['id']}", json={"status": "archived"}, key=employer.key).status_code
        == 200
    )
    clock.today = date(2026, 4, 2)
    result = api.put(f"{JOBS}/{job['id']}", json={"status": "active"}, key=employer.key)
    assert result.status_code == 200, result.text
    assert (result.json["publishDate"], result.json["closeDate"]) == ("2026-04-02", "2026-04-30")
