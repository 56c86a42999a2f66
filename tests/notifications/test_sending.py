"""C18: the notifications sent, against local engines that check the protocols (IndexNow's
JSON batch and key file; Google's token exchange by a signed JWT, then one publish request a
URL with its bearer token), on both databases: retried with a backoff on a 429 or a 5xx,
refused for good on another 4xx, within Google's daily quota, and nothing while off."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp, create_app
from models.core.settings import Settings
from models.db.entities import SearchNotification
from models.db.unit_of_work import session_scope
from models.notifications import queue as notifications
from tests.conftest import Api, Clock
from tests.factories import create_job
from tests.notifications.conftest import BASE, KEY, pages, queued, service_account
from tests.notifications.engines import Engines, serving
from workers import search_engines

# Ahead of the writes' own clock, so what they queue is due; noon, so that hours later is the
# same UTC day.
NOW = datetime.now(UTC).replace(hour=12) + timedelta(days=1)


@pytest.fixture
def engines(private_key: rsa.RSAPrivateKey) -> Iterator[Engines]:
    with serving(private_key.public_key()) as found:
        yield found
    search_engines.forget_credentials()


@pytest.fixture
def on(
    settings: Settings, tmp_path: Path, private_key: rsa.RSAPrivateKey, engines: Engines
) -> Settings:
    account = service_account(tmp_path / "account.json", private_key, engines.url("/token"))
    return dataclasses.replace(
        settings,
        public_base_url=BASE,
        indexnow_key=KEY,
        indexnow_endpoint=engines.url("/indexnow"),
        google_service_account_file=account,
        google_indexing_endpoint=engines.url("/publish"),
        google_indexing_daily_quota=5,
    )


@pytest.fixture
def app(on: Settings, sessions: sessionmaker[Session], clock: Clock) -> WsgiApp:
    return create_app(on, sessions, today=clock)


def active(api: Any, employer: Any) -> int:
    return int(create_job(api, employer, status="active")["id"])


def rows(sessions: sessionmaker[Session], channel: str) -> list[SearchNotification]:
    with sessions() as s:
        found = s.scalars(
            select(SearchNotification)
            .where(SearchNotification.channel == channel)
            .order_by(SearchNotification.id)
        )
        return list(found)


def test_indexnow_gets_one_batch_with_the_key_and_its_location(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    first, second = active(api, employer), active(api, employer)
    sent = search_engines.send_indexnow(sessions, on, now=lambda: NOW)
    assert sent == 4
    [batch] = engines.indexnow
    assert batch == {
        "host": "jobs.example.ca",
        "key": KEY,
        "keyLocation": f"{BASE}/{KEY}.txt",
        "urlList": [url for _kind, url in pages(first) + pages(second)],
    }
    assert {r.status for r in rows(sessions, "indexnow")} == {"sent"}
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW) == 0  # nothing left
    assert len(engines.indexnow) == 1


def test_the_key_file_is_served_where_the_batches_say(api: Api) -> None:
    result = api.client.simulate_get(f"/{KEY}.txt")
    assert result.status_code == 200 and result.text == KEY
    assert result.headers["content-type"] == "text/plain; charset=utf-8"


def test_no_key_file_is_served_while_indexnow_is_off(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    client = Api(create_app(settings, sessions)).client
    assert client.simulate_get(f"/{KEY}.txt").status_code == 404


def test_google_gets_a_token_by_a_signed_jwt_then_one_request_a_url(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    job = active(api, employer)
    assert api.delete(f"/api/v1.1/jobs/{job}", key=employer.key).status_code == 204
    assert search_engines.send_google(sessions, on, now=lambda: NOW) == 2
    assert engines.refused == []
    [claims] = engines.claims  # one token, for both requests
    assert claims["iss"] == "indexer@jobpost-test.iam.gserviceaccount.com"
    assert engines.published == [
        {"url": url, "type": kind} for kind, url in pages(job, "URL_DELETED")
    ]
    assert [(r.status, r.last_status_code) for r in rows(sessions, "google")] == [("sent", 200)] * 2


def test_a_signature_by_another_key_gets_no_token_and_the_urls_wait(
    api: Api,
    employer: Any,
    sessions: sessionmaker[Session],
    on: Settings,
    engines: Engines,
    tmp_path: Path,
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = service_account(tmp_path / "forged.json", other, engines.url("/token"))
    active(api, employer)
    wrong = dataclasses.replace(on, google_service_account_file=forged)
    assert search_engines.send_google(sessions, wrong, now=lambda: NOW) == 0
    assert engines.refused == ["bad signature"] and engines.published == []
    found = rows(sessions, "google")
    assert [r.status for r in found] == ["pending"] * 2
    assert all("no token" in (r.last_error or "") for r in found)


def test_the_daily_quota_holds_and_the_rest_wait_for_the_next_day(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    jobs = [active(api, employer) for _ in range(4)]  # 8 URLs, a quota of 5 a day
    assert search_engines.send_google(sessions, on, now=lambda: NOW) == 5
    assert search_engines.send_google(sessions, on, now=lambda: NOW + timedelta(hours=8)) == 0
    assert len(engines.published) == 5
    assert len(queued(sessions, "google")) == 3
    tomorrow = NOW + timedelta(days=1)
    assert search_engines.send_google(sessions, on, now=lambda: tomorrow) == 3
    assert [p["url"] for p in engines.published] == [u for j in jobs for _k, u in pages(j)]


def test_a_5xx_is_retried_after_a_backoff_then_sent(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    active(api, employer)
    engines.answer("/indexnow", 503)
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW) == 0
    waiting = rows(sessions, "indexnow")
    assert [(r.status, r.attempts, r.last_status_code) for r in waiting] == [
        ("pending", 1, 503)
    ] * 2
    later = min(r.next_attempt_at for r in waiting)
    assert NOW + timedelta(seconds=30) <= later <= NOW + timedelta(seconds=60)
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW) == 0  # not yet due
    assert len(engines.indexnow) == 1
    assert search_engines.send_indexnow(sessions, on, now=lambda: later) == 2
    assert [(r.status, r.attempts) for r in rows(sessions, "indexnow")] == [("sent", 2)] * 2


def test_a_429_from_google_stops_the_run_and_the_rest_wait(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    active(api, employer)
    engines.answer("/publish", 429)
    assert search_engines.send_google(sessions, on, now=lambda: NOW) == 0
    found = rows(sessions, "google")
    assert [(r.status, r.last_status_code) for r in found] == [("pending", 429)] * 2
    assert len(engines.refused) == 0 and engines.published == []


def test_another_4xx_fails_for_good_with_the_answer_recorded(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    active(api, employer)
    engines.answer("/indexnow", 403)  # IndexNow: the key is not valid for the host
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW) == 0
    found = rows(sessions, "indexnow")
    assert [(r.status, r.last_status_code) for r in found] == [("failed", 403)] * 2
    assert all((r.last_error or "").startswith("indexnow answered 403") for r in found)
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW + timedelta(days=1)) == 0


def test_an_engine_that_does_not_answer_is_retried(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, unused_port: int
) -> None:
    active(api, employer)
    gone = dataclasses.replace(on, indexnow_endpoint=f"http://127.0.0.1:{unused_port}/indexnow")
    assert search_engines.send_indexnow(sessions, gone, now=lambda: NOW) == 0
    found = rows(sessions, "indexnow")
    assert [(r.status, r.last_status_code) for r in found] == [("pending", None)] * 2
    assert all((r.last_error or "").startswith("no answer from IndexNow") for r in found)


def test_attempts_spent_fail_for_good(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    active(api, employer)
    engines.answer("/indexnow", *[500] * 8)
    for day in range(8):
        at = NOW + timedelta(days=day)
        search_engines.send_indexnow(sessions, on, now=lambda at=at: at)  # type: ignore[misc]
    found = rows(sessions, "indexnow")
    assert [(r.status, r.attempts, r.last_status_code) for r in found] == [("failed", 8, 500)] * 2


def test_nothing_is_sent_while_off(
    settings: Settings, sessions: sessionmaker[Session], engines: Engines
) -> None:
    assert search_engines.send(sessions, settings) == {}
    assert engines.indexnow == [] and engines.tokens == [] and engines.published == []


def test_finished_notifications_are_purged_after_the_retention(
    api: Api, employer: Any, sessions: sessionmaker[Session], on: Settings, engines: Engines
) -> None:
    active(api, employer)
    assert search_engines.send_indexnow(sessions, on, now=lambda: NOW) == 2
    assert search_engines.send_google(sessions, on, now=lambda: NOW) == 2
    with session_scope(sessions) as s:
        assert notifications.purge(s, now=NOW + timedelta(days=179), retention_days=180) == 0
        assert notifications.purge(s, now=NOW + timedelta(days=181), retention_days=180) == 4
        assert notifications.used_today(s, "google", now=NOW) == 0  # the day's count too
    assert rows(sessions, "indexnow") == rows(sessions, "google") == []
