"""C18: which writes queue search-engine notifications, on both databases. A job's pages
are `URL_UPDATED` when it is published or changed while public, `URL_DELETED` when it stops
being public: archived, expired, taken down, deleted, archived by a snapshot sync. Nothing is
queued while no channel is configured, nor for a job that never was public."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp, create_app
from api.pages import page_url
from models.core.dates import on_day, utcnow
from models.core.settings import Settings
from models.db.entities import SearchNotification
from models.db.unit_of_work import session_scope
from models.jobs import upkeep
from models.notifications import channels
from tests.conftest import Api, Clock
from tests.factories import JOBS, create_job, job_body, take_down
from tests.notifications.conftest import BASE, notifying, pages, queued
from workers import syncing

SYNCS = "/api/v1.1/syncs"


@pytest.fixture
def app(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    tmp_path: Path,
    private_key: rsa.RSAPrivateKey,
) -> WsgiApp:
    return create_app(notifying(settings, tmp_path, private_key), sessions, today=clock)


def active(api: Any, employer: Any, **overrides: Any) -> dict[str, Any]:
    return create_job(api, employer, **{"status": "active", **overrides})


def test_the_pages_named_are_the_job_pages_the_site_serves() -> None:
    assert channels.page_urls(BASE, 7) == [page_url(BASE, 7, "en"), page_url(BASE, 7, "fr")]


def test_nothing_is_queued_while_no_channel_is_configured(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Any
) -> None:
    off = Api(
        create_app(dataclasses.replace(settings, public_base_url=BASE), sessions, today=clock)
    )
    job = active(off, employer)
    off.put(f"{JOBS}/{job['id']}", json={"title": "Head Baker"}, key=employer.key)
    off.delete(f"{JOBS}/{job['id']}", key=employer.key)
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(SearchNotification)) == 0


def test_publishing_queues_both_pages_on_each_channel_and_a_draft_nothing(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    create_job(api, employer, status="draft")
    assert queued(sessions) == []
    job = active(api, employer)
    assert queued(sessions) == pages(job["id"])
    assert queued(sessions, "google") == pages(job["id"])


def test_a_change_while_public_updates_and_leaving_the_public_pages_deletes(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(api, employer)
    path = f"{JOBS}/{job['id']}"
    api.put(path, json={"title": "Head Baker"}, key=employer.key)
    assert queued(sessions) == pages(job["id"])  # coalesced: one row a URL waits
    assert api.put(path, json={"status": "archived"}, key=employer.key).status_code == 200
    assert queued(sessions) == pages(job["id"], "URL_DELETED")
    api.put(path, json={"title": "Archived Baker"}, key=employer.key)  # not public: nothing
    assert queued(sessions) == pages(job["id"], "URL_DELETED")


def test_deleting_a_public_job_deletes_its_pages_and_a_draft_nothing(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    draft = create_job(api, employer, status="draft", referenceId="D-1")
    assert api.delete(f"{JOBS}/{draft['id']}", key=employer.key).status_code == 204
    job = active(api, employer, referenceId="A-1")
    result = api.delete(JOBS, json={"referenceId": "A-1"}, key=employer.key)
    assert result.status_code == 204
    assert queued(sessions) == pages(job["id"], "URL_DELETED")


def test_a_take_down_deletes_the_pages(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(api, employer)
    take_down(api, sessions, job["id"])
    assert queued(sessions) == pages(job["id"], "URL_DELETED")


def test_expiry_deletes_and_a_refresh_updates(
    api: Any, make_employer: Any, sessions: sessionmaker[Session], clock: Clock
) -> None:
    standard = make_employer("Standard Co")
    unlimited = make_employer("Unlimited Co", plan="unlimited")
    closing = active(api, standard, closeDate=(clock.today + timedelta(days=1)).isoformat())
    refreshed = active(api, unlimited, autoRefresh=True)
    with sessions() as s:
        s.execute(delete(SearchNotification))
        s.commit()
    with session_scope(sessions) as s:
        assert upkeep.expire(s, today=clock.today + timedelta(days=2)) == 1
    assert queued(sessions) == pages(closing["id"], "URL_DELETED")
    with session_scope(sessions) as s:
        assert upkeep.refresh(s, today=clock.today + timedelta(days=8)) == 1
    assert queued(sessions)[2:] == pages(refreshed["id"])


def test_sync_runs_queue_their_creates_updates_and_the_snapshot_archived(
    api: Any,
    employer: Any,
    sessions: sessionmaker[Session],
    settings: Settings,
    clock: Clock,
) -> None:
    def run(mode: str, items: list[dict[str, Any]]) -> None:
        started = api.post(SYNCS, json={"mode": mode, "jobs": items}, key=employer.key)
        assert started.status_code == 202, started.text
        moment = on_day(settings.timezone, clock.today, utcnow())
        done = syncing.process(
            sessions,
            started.json["id"],
            lease_seconds=300,
            timezone=settings.timezone,
            now=lambda: moment,
        )
        assert done == "completed"

    kept = api.put(
        JOBS, json={**job_body(status="active"), "referenceId": "KEPT"}, key=employer.key
    )
    gone = api.put(
        JOBS, json={**job_body(status="active"), "referenceId": "GONE"}, key=employer.key
    )
    with sessions() as s:
        s.execute(delete(SearchNotification))
        s.commit()
    items = [
        {**job_body(status="active"), "referenceId": "NEW"},
        {**job_body(status="draft"), "referenceId": "DRAFT"},
        {"referenceId": "KEPT", "title": "Head Baker"},
    ]
    run("snapshot", items)
    listed = api.get(JOBS, key=employer.key).json["data"]
    new = next(j["id"] for j in listed if j["referenceId"] == "NEW")
    assert sorted(queued(sessions)) == sorted(
        pages(new) + pages(kept.json["id"]) + pages(gone.json["id"], "URL_DELETED")
    )
