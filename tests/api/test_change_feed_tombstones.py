"""The change feed tells of deletions (C10): a deleted job's tombstone, in position order
among the jobs, kept CHANGE_FEED_TOMBSTONE_DAYS, behind the same lag."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from api.app import Collaborators, create_app
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db import feed as db_feed
from models.db.entities import JobTombstone
from tests.api.test_change_feed import Present, feed, follow, ids, walk
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, problem
from workers.tasks import run_purge


@pytest.fixture
def present() -> Present:
    return Present(60.0)  # past the lag (5 s): every change made so far shows


@pytest.fixture
def api(settings: Settings, sessions: sessionmaker[Session], clock: Clock, present: Present) -> Api:
    return Api(create_app(settings, sessions, Collaborators(now=present), today=clock))


def tombstones(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobTombstone)) or 0)


def test_a_deleted_job_comes_as_a_tombstone_in_position_order(api: Api, employer: Account) -> None:
    a, b, c = (create_job(api, employer, referenceId=r) for r in ("A", "B", "C"))
    assert api.delete(f"{JOBS}/{b['id']}", key=employer.key).status_code == 204
    assert api.delete(JOBS, key=employer.key, json={"referenceId": "A"}).status_code == 204
    d = create_job(api, employer, referenceId="A")  # the referenceId is free again
    seen, _ = walk(api, employer, feed(api, employer, pageSize=2))
    assert ids(seen) == [c["id"], b["id"], a["id"], d["id"]]
    gone = seen[1]
    assert gone == {
        "id": b["id"],
        "referenceId": "B",
        "deleted": True,
        "updatedAt": gone["updatedAt"],
    }
    assert seen[2]["referenceId"] == "A" and seen[2]["deleted"] is True
    stamps = [(j["updatedAt"], j["id"]) for j in seen]
    assert stamps == sorted(stamps) and "deleted" not in seen[3]


def test_a_walk_resumed_later_learns_of_a_deletion_since(api: Api, employer: Account) -> None:
    job = create_job(api, employer, referenceId="R-1")
    seen, resume = walk(api, employer, feed(api, employer))
    assert ids(seen) == [job["id"]]
    api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    later = follow(api, employer, resume)
    assert later["data"] == [
        {
            "id": job["id"],
            "referenceId": "R-1",
            "deleted": True,
            "updatedAt": later["data"][0]["updatedAt"],
        }
    ]
    assert follow(api, employer, later["paging"]["next"])["data"] == []  # told once


def test_a_deletion_is_told_to_walks_filtered_by_q_and_status(api: Api, employer: Account) -> None:
    job = create_job(api, employer, title="Baker", status="active")
    api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    for params in ({"q": "baker"}, {"status": "active"}, {"q": "nothing like it"}):
        assert ids(feed(api, employer, **params)["data"]) == [job["id"]], params


def test_a_job_without_a_reference_id_has_a_null_one_in_its_tombstone(
    api: Api, employer: Account
) -> None:
    job = create_job(api, employer)
    api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    (gone,) = feed(api, employer)["data"]
    assert gone["referenceId"] is None and gone["deleted"] is True


def test_the_lag_holds_back_a_deletion_until_it_is_old_enough(
    api: Api, employer: Account, present: Present
) -> None:
    job = create_job(api, employer)
    shown = feed(api, employer)
    api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    present.ahead = 0.0
    held = follow(api, employer, shown["paging"]["next"])
    assert held["data"] == [] and held["paging"]["next"] == shown["paging"]["next"]
    present.ahead = 5.5
    assert ids(follow(api, employer, shown["paging"]["next"])["data"]) == [job["id"]]


def test_another_employers_deletions_are_not_in_this_feed(
    api: Api, employer: Account, make_employer: Any
) -> None:
    other = make_employer("Other Corp")
    job = create_job(api, other)
    api.delete(f"{JOBS}/{job['id']}", key=other.key)
    assert feed(api, employer)["data"] == []
    assert ids(feed(api, other)["data"]) == [job["id"]]


def test_a_refused_delete_leaves_no_tombstone(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, referenceId="KEEP")
    problem(api.delete(f"{JOBS}/999999", key=employer.key), 404, "not_found")
    problem(api.delete(JOBS, key=employer.key, json={"referenceId": "NONE"}), 404, "not_found")
    stale = {"If-Match": '"stale"'}
    refused = api.delete(f"{JOBS}/{job['id']}", key=employer.key, headers=stale)
    problem(refused, 412, "precondition_failed")
    assert tombstones(sessions) == 0
    assert [j.get("deleted") for j in feed(api, employer)["data"]] == [None]


def test_a_delete_too_slow_to_commit_within_the_lag_is_rolled_back_with_its_tombstone(
    api: Api, employer: Account, sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tombstone is stamped as any change (`models.db.feed.stamp`): 3 s between the stamp
    and the commit is over half the lag (5 s), and the DELETE is undone, job and tombstone."""
    job = create_job(api, employer)
    moments = iter([utcnow(), utcnow() + timedelta(seconds=3)])
    monkeypatch.setattr(db_feed, "utcnow", lambda: next(moments, utcnow() + timedelta(seconds=3)))
    problem(api.delete(f"{JOBS}/{job['id']}", key=employer.key), 503, "database_unavailable")
    monkeypatch.undo()
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).status_code == 200
    assert tombstones(sessions) == 0


def test_the_daily_purge_deletes_tombstones_past_their_days(
    api: Api, employer: Account, sessions: sessionmaker[Session], settings: Settings
) -> None:
    old, young = create_job(api, employer), create_job(api, employer)
    for job in (old, young):
        api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    with sessions() as s:
        s.execute(
            update(JobTombstone)
            .where(JobTombstone.job_id == old["id"])
            .values(deleted_at=utcnow() - timedelta(days=8))
        )
        s.commit()
    kept = dataclasses.replace(settings, change_feed_tombstone_days=7)
    assert run_purge(sessions, kept) >= 1
    assert ids(feed(api, employer)["data"]) == [young["id"]]
    assert run_purge(sessions, dataclasses.replace(settings, change_feed_tombstone_days=30)) == 0
    assert tombstones(sessions) == 1


def test_the_tombstone_days_setting_defaults_to_30_and_takes_whole_days() -> None:
    assert Settings.from_env({}).change_feed_tombstone_days == 30
    assert Settings.from_env({"CHANGE_FEED_TOMBSTONE_DAYS": "7"}).change_feed_tombstone_days == 7
    for bad in ("0", "1.5", "-1", "x"):
        with pytest.raises(Exception, match="CHANGE_FEED_TOMBSTONE_DAYS"):
            Settings.from_env({"CHANGE_FEED_TOMBSTONE_DAYS": bad})
