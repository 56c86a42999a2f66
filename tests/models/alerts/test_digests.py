"""The digests of job alerts (C19), planned and read on both databases: which alerts are due,
one query per stored search, idempotent planning, what "new" means (a job's first opening
after the watermark: never twice, never skipped), and what a digest lists at its send."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.alerts import digests
from models.alerts import subscriptions as alerts
from models.core.dates import today_in, utcnow
from models.db.entities import AlertMail, AlertSubscription, Employer, Job
from models.db.unit_of_work import session_scope
from models.jobs import writes as jobs
from models.jobs.feeds import Filters
from tests.factories import job_body

LAG = 5.0  # CHANGE_FEED_LAG_SECONDS's default
TODAY = today_in(ZoneInfo("America/Toronto"))


def confirmed(
    sessions: sessionmaker[Session],
    email: str,
    search: Filters,
    *,
    days_ago: float = 2,
    frequency: str = "daily",
) -> int:
    """A confirmed alert whose watermark (its confirmation) is `days_ago` in the past."""
    at = utcnow() - timedelta(days=days_ago)
    with session_scope(sessions) as session:
        made = alerts.sign_up(session, email, frequency, "en", search, now=at)
        assert alerts.confirm(session, made.confirm_token, now=at) is not None
        return made.subscription.id


def employer(sessions: sessionmaker[Session]) -> int:
    with session_scope(sessions) as session:
        return employers.create_employer(session, "Maple Corp").id


def post(sessions: sessionmaker[Session], employer_id: int, title: str, **body: Any) -> int:
    with session_scope(sessions) as session:
        owner = session.get_one(Employer, employer_id)
        overrides = {"status": "active", **body}
        return jobs.create(session, owner, job_body(title=title, **overrides), today=TODAY).id


def put(sessions: sessionmaker[Session], employer_id: int, job_id: int, **body: Any) -> None:
    with session_scope(sessions) as session:
        owner = session.get_one(Employer, employer_id)
        jobs.update(session, owner, jobs.get(session, owner, job_id), body, today=TODAY)


def plan(sessions: sessionmaker[Session], *, hours: float = 0, limit: int = 200) -> list[int]:
    """A planning run `hours` from now, its ids. Without a lag: every job here has committed
    (the lag has a test of its own)."""
    queued: list[int] = []
    now = utcnow() + timedelta(hours=hours)
    digests.plan(sessions, now=now, today=TODAY, lag_seconds=0, hand_on=queued.extend, limit=limit)
    return queued


def mail(sessions: sessionmaker[Session], mail_id: int) -> AlertMail:
    with session_scope(sessions) as session:
        return session.get_one(AlertMail, mail_id)


def listed(sessions: sessionmaker[Session], mail_id: int, today: date = TODAY) -> list[int]:
    """The job ids a digest lists at its send, as the worker reads them."""
    with session_scope(sessions) as session:
        row = session.execute(
            select(AlertMail, AlertSubscription.filters)
            .join(AlertSubscription)
            .where(AlertMail.id == mail_id)
        ).one()
        found = digests.contents(session.connection(), _Row(row[0], row[1]), today=today)
        return [job.id for job in found.jobs]


class _Row:
    def __init__(self, entry: AlertMail, filters: str) -> None:
        self.filters, self.opened_from, self.opened_until = (
            filters,
            entry.opened_from,
            entry.opened_until,
        )


def sent(sessions: sessionmaker[Session], mail_id: int) -> None:
    """What the worker records after the relay's 250: sent, and the watermark moved."""
    with session_scope(sessions) as session:
        entry = session.get_one(AlertMail, mail_id)
        entry.status = "sent"
        assert entry.opened_until is not None
        digests.move_watermark(session, entry.subscription_id, entry.opened_until)


@pytest.fixture
def searches_asked(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    """The statements that ask the jobs for a search's newest opening."""
    seen: list[str] = []
    bind = sessions.kw["bind"]

    def look(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if re.search(r"ORDER BY jobs\.opened_at DESC\s+LIMIT", statement):
            seen.append(statement)

    event.listen(bind, "before_cursor_execute", look)
    yield seen
    event.remove(bind, "before_cursor_execute", look)


def test_only_due_confirmed_alerts_with_new_jobs_get_a_digest_each_search_asked_once(
    sessions: sessionmaker[Session], searches_asked: list[str]
) -> None:
    cook = Filters(q="cook")
    due = [confirmed(sessions, f"due{i}@example.com", cook) for i in range(3)]
    confirmed(sessions, "recent@example.com", cook, days_ago=0.5)  # daily, 12 h ago: not due
    confirmed(sessions, "weekly@example.com", cook, frequency="weekly")  # 2 days: not due
    weekly_due = confirmed(sessions, "week@example.com", cook, days_ago=7, frequency="weekly")
    confirmed(sessions, "pilot@example.com", Filters(q="pilot"))  # due, nothing new
    with session_scope(sessions) as session:  # pending: never confirmed
        alerts.sign_up(session, "pending@example.com", "daily", "en", cook, now=utcnow())
    employer_id = employer(sessions)
    post(sessions, employer_id, "Line Cook")
    post(sessions, employer_id, "Baker")
    queued = plan(sessions)
    with session_scope(sessions) as session:
        planned = session.scalars(select(AlertMail).where(AlertMail.id.in_(queued))).all()
        assert sorted(m.subscription_id for m in planned) == sorted([*due, weekly_due])
        assert {(m.kind, m.status) for m in planned} == {("digest", "pending")}
    assert len(searches_asked) == 2  # "cook" and "pilot": not one per alert
    assert all(len(listed(sessions, i)) == 1 for i in queued)


def test_planning_again_queues_nothing_more(sessions: sessionmaker[Session]) -> None:
    confirmed(sessions, "ada@example.com", Filters())
    post(sessions, employer(sessions), "Line Cook")
    assert len(plan(sessions)) == 1
    assert plan(sessions) == []  # its digest is under way
    with session_scope(sessions) as session:
        assert session.query(AlertMail).count() == 1


def test_planning_in_batches_of_searches_misses_none(sessions: sessionmaker[Session]) -> None:
    words = ["cook", "baker", "chef", "pilot", "nurse"]
    for word in words:
        confirmed(sessions, f"{word}@example.com", Filters(q=word))
    employer_id = employer(sessions)
    for word in words:
        post(sessions, employer_id, f"Head {word}")
    assert len(plan(sessions, limit=2)) == len(words)


def test_no_job_twice_and_a_job_opening_later_is_in_the_next_digest(
    sessions: sessionmaker[Session],
) -> None:
    alert = confirmed(sessions, "ada@example.com", Filters(q="cook"))
    employer_id = employer(sessions)
    first = post(sessions, employer_id, "Line Cook")
    later = post(sessions, employer_id, "Prep Cook", status="draft")  # not open yet
    [digest] = plan(sessions)
    assert listed(sessions, digest) == [first]
    sent(sessions, digest)
    # The first job closes and opens again (re-published: publishDate today); the draft opens.
    put(sessions, employer_id, first, status="archived")
    put(sessions, employer_id, first, status="active")
    put(sessions, employer_id, later, status="active")
    newest = post(sessions, employer_id, "Sous Cook")
    [second] = plan(sessions, hours=24)
    assert listed(sessions, second) == [newest, later]  # newest first; `first` not again
    sent(sessions, second)
    assert plan(sessions, hours=48) == []
    with session_scope(sessions) as session:
        watermark = session.get_one(AlertSubscription, alert).last_sent_at
        assert watermark == mail(sessions, second).opened_until


def test_a_job_closed_after_the_planning_is_left_out(sessions: sessionmaker[Session]) -> None:
    confirmed(sessions, "ada@example.com", Filters(q="cook"))
    employer_id = employer(sessions)
    kept = post(sessions, employer_id, "Line Cook")
    closed = post(sessions, employer_id, "Prep Cook")
    [digest] = plan(sessions)
    assert sorted(listed(sessions, digest)) == sorted([kept, closed])
    put(sessions, employer_id, closed, status="archived")
    assert listed(sessions, digest) == [kept]


def test_a_job_opened_within_the_lag_waits_for_the_next_run(
    sessions: sessionmaker[Session],
) -> None:
    """Openings are read up to CHANGE_FEED_LAG_SECONDS before now: a later one may not have
    committed yet, so it belongs to the next digest, never skipped by this one's watermark."""
    confirmed(sessions, "ada@example.com", Filters())
    job_id = post(sessions, employer(sessions), "Line Cook")
    now = utcnow()
    with session_scope(sessions) as session:
        opened = session.get_one(Job, job_id).opened_at
        assert opened is not None and opened <= now
    early = digests.plan(sessions, now=opened, today=TODAY, lag_seconds=LAG)
    assert early.queued == 0
    assert len(plan(sessions)) == 1


def test_a_digest_lists_twenty_jobs_and_counts_them_all(sessions: sessionmaker[Session]) -> None:
    confirmed(sessions, "ada@example.com", Filters(q="cook"))
    employer_id = employer(sessions)
    ids = [post(sessions, employer_id, f"Cook {i}") for i in range(25)]
    [digest] = plan(sessions)
    assert listed(sessions, digest) == list(reversed(ids))[: digests.LISTED]
    with session_scope(sessions) as session:
        row = _Row(session.get_one(AlertMail, digest), "q=cook")
        assert digests.contents(session.connection(), row, today=TODAY).total == 25


def test_opened_at_is_the_first_opening_only(sessions: sessionmaker[Session]) -> None:
    employer_id = employer(sessions)
    draft = post(sessions, employer_id, "Line Cook", status="draft")
    with session_scope(sessions) as session:
        assert session.get_one(Job, draft).opened_at is None
    put(sessions, employer_id, draft, status="active")
    with session_scope(sessions) as session:
        job = session.get_one(Job, draft)
        first = job.opened_at
        assert first is not None and first == job.updated_at
    put(sessions, employer_id, draft, status="archived")
    put(sessions, employer_id, draft, status="active")
    with session_scope(sessions) as session:
        session.expire_all()
        assert session.get_one(Job, draft).opened_at == first


def test_an_unsubscribed_alert_is_not_planned(sessions: sessionmaker[Session]) -> None:
    alert = confirmed(sessions, "ada@example.com", Filters())
    with session_scope(sessions) as session:
        found = session.get_one(AlertSubscription, alert)
        token = alerts.manage_token(session, found, now=utcnow())
        alerts.unsubscribe(session, token, now=utcnow())
    post(sessions, employer(sessions), "Line Cook")
    assert plan(sessions) == []


def test_an_alert_holds_one_digest_under_way(sessions: sessionmaker[Session]) -> None:
    """A second planner beside the first (two beats) fails rather than queue a second."""
    confirmed(sessions, "ada@example.com", Filters())
    post(sessions, employer(sessions), "Line Cook")
    [digest] = plan(sessions)
    alert_id = mail(sessions, digest).subscription_id
    with pytest.raises(IntegrityError), session_scope(sessions) as session:
        now = utcnow()
        second = AlertMail(
            subscription_id=alert_id,
            kind="digest",
            created_at=now,
            status="pending",
            attempts=0,
            next_attempt_at=now,
        )
        session.add(second)
        session.flush()
    sent(sessions, digest)  # none under way now: the next one is queued when jobs open
    post(sessions, employer(sessions), "Prep Cook")
    assert len(plan(sessions, hours=24)) == 1
