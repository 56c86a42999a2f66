"""C17: a search page is kept for SEARCH_PAGE_SECONDS by each web process, by its language and
query string as asked, as a shared cache may keep it for its `max-age`; never a page of errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp, create_app
from api.cache import Recent
from models.core.settings import Settings
from tests.api.test_search_page import active, titles
from tests.conftest import CheckedClient, Clock
from tests.factories import take_down


@pytest.fixture
def client(app: WsgiApp) -> CheckedClient:
    return CheckedClient(app)


class Ticks:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_kept_page_lapses_after_its_seconds() -> None:
    ticks = Ticks()
    kept = Recent(1 << 20, 10, ticks)
    kept.put("en q=cook", b"<p>cook</p>")
    ticks.now += 9.9
    assert kept.get("en q=cook") == b"<p>cook</p>"
    assert kept.get("fr q=cook") is None
    ticks.now += 0.1
    assert kept.get("en q=cook") is None


def test_the_kept_pages_stay_within_their_bytes() -> None:
    kept = Recent(16 * 1024, 10, Ticks())
    for i in range(40):
        kept.put(f"en page={i}", b"x" * 500)
    assert kept.get("en page=0") is None  # the oldest made room
    assert kept.get("en page=39") == b"x" * 500
    kept.put("en huge", b"x" * 2048)  # more than a sixteenth of the bound: never kept
    assert kept.get("en huge") is None


def test_no_seconds_keeps_nothing() -> None:
    kept = Recent(1 << 20, 0, Ticks())
    kept.put("en", b"page")
    assert kept.get("en") is None


def test_the_same_search_within_its_seconds_is_the_same_page(
    client: CheckedClient, api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(api, employer, title="Fee baker")
    assert titles(client.simulate_get("/jobs", query_string="q=baker")) == ["Fee baker"]
    take_down(api, sessions, job["id"])
    again = client.simulate_get("/jobs", query_string="q=baker")
    assert titles(again) == ["Fee baker"]  # kept: the job page itself says it is gone
    assert again.headers["cache-control"] == "public, max-age=60"
    assert titles(client.simulate_get("/jobs", query_string="q=baker&lang=fr")) == []
    assert titles(client.simulate_get("/jobs", query_string="q=Baker")) == []


def test_a_page_of_errors_is_never_kept(client: CheckedClient) -> None:
    for _ in range(2):
        page = client.simulate_get("/jobs", query_string="province=XX")
        assert page.status_code == 400


@pytest.fixture
def unkept(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> CheckedClient:
    """A web process with SEARCH_PAGE_SECONDS=0."""
    quick = dataclasses.replace(settings, search_page_seconds=0)
    return CheckedClient(create_app(quick, sessions, today=clock))


def test_with_no_seconds_a_change_shows_at_once(
    unkept: CheckedClient, api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(api, employer, title="Fee baker")
    assert titles(unkept.simulate_get("/jobs", query_string="q=baker")) == ["Fee baker"]
    take_down(api, sessions, job["id"])
    assert titles(unkept.simulate_get("/jobs", query_string="q=baker")) == []
