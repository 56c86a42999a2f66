"""C15 Reach: robots.txt, the sitemap index and its chunks.

Through falcon's test client checking each answer against openapi.json, on both databases (the
`engine` fixture). The chunk size and the read batch are lowered so a few jobs make several
chunks and batches.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any

import falcon.testing
import pytest
from sqlalchemy.orm import Session, sessionmaker

from api import sitemaps
from api.app import Collaborators, WsgiApp, create_app
from api.server import DEFAULT_LISTEN_URL
from models.core.dates import utcnow
from models.core.settings import Settings
from models.jobs import feeds, upkeep
from tests.conftest import CheckedClient, Clock
from tests.factories import JOBS, create_job, problem, take_down

SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XHTML = "{http://www.w3.org/1999/xhtml}"
BASE = "https://jobs.example.ca"
FRENCH = {"title": "Boulanger principal", "description": "<p>Cuire du <em>pain</em>.</p>"}


@pytest.fixture
def client(app: WsgiApp) -> falcon.testing.TestClient:
    return CheckedClient(app)


@pytest.fixture
def later(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> CheckedClient:
    """A client of an app whose present is a minute on: every change is a lag old, settled."""
    parts = Collaborators(now=lambda: utcnow() + timedelta(minutes=1))
    return CheckedClient(create_app(settings, sessions, parts, today=clock))


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 2 ids and batches of 2 jobs: a few jobs cross their bounds."""
    monkeypatch.setattr(sitemaps, "CHUNK", 2)
    monkeypatch.setattr(feeds, "BATCH", 2)


def active(api: Any, employer: Any, **overrides: Any) -> dict[str, Any]:
    return create_job(api, employer, **{"status": "active", **overrides})


def page(job_id: int, code: str = "en", base: str = DEFAULT_LISTEN_URL) -> str:
    return f"{base}/jobs/{job_id}?lang={code}"


def xml(result: falcon.testing.Result, content_type: str = "application/xml") -> ET.Element:
    assert result.status_code == 200, result.text
    assert result.headers["content-type"] == content_type
    return ET.fromstring(result.content)


def sitemap_urls(client: falcon.testing.TestClient) -> dict[str, ET.Element]:
    """Every <url> of every chunk the index names, by its loc."""
    index = xml(client.simulate_get("/sitemap.xml"))
    found: dict[str, ET.Element] = {}
    for loc in index.iter(f"{SM}loc"):
        path = loc.text.removeprefix(DEFAULT_LISTEN_URL) if loc.text else ""
        for url in xml(client.simulate_get(path)).iter(f"{SM}url"):
            text = url.findtext(f"{SM}loc")
            assert text and text not in found, "a page in two chunks"
            found[text] = url
    return found


# --- robots.txt ------------------------------------------------------------------------------


def test_robots_allows_the_pages_disallows_the_api_and_names_the_sitemap(
    client: falcon.testing.TestClient,
) -> None:
    result = client.simulate_get("/robots.txt", headers={"Host": "evil.example"})
    assert result.status_code == 200
    assert result.headers["content-type"] == "text/plain; charset=utf-8"
    lines = result.text.splitlines()
    assert lines[0] == "User-agent: *"
    assert "Allow: /jobs/" in lines and "Disallow: /api/" in lines
    assert f"Sitemap: {DEFAULT_LISTEN_URL}/sitemap.xml" in lines  # never the Host header
    again = client.simulate_get("/robots.txt", headers={"If-None-Match": result.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_urls_are_on_public_base_url_never_the_host(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, api: Any, employer: Any
) -> None:
    job = active(api, employer)
    app = create_app(dataclasses.replace(settings, public_base_url=BASE), sessions, today=clock)
    client, host = CheckedClient(app), {"Host": "evil.example", "X-Forwarded-Host": "evil.example"}
    assert f"Sitemap: {BASE}/sitemap.xml" in client.simulate_get("/robots.txt", headers=host).text
    index = client.simulate_get("/sitemap.xml", headers=host).text
    assert f"<loc>{BASE}/sitemaps/jobs-" in index and "evil" not in index
    chunk = client.simulate_get(f"/sitemaps/jobs-{(job['id'] - 1) // 50_000 + 1}.xml")
    assert page(job["id"], base=BASE) in chunk.text and "evil" not in chunk.text


# --- sitemaps --------------------------------------------------------------------------------


def test_the_index_names_a_chunk_per_id_range_each_with_its_pages_in_both_languages(
    client: falcon.testing.TestClient, api: Any, employer: Any, small: None
) -> None:
    jobs = [active(api, employer) for _ in range(5)]
    create_job(api, employer, status="draft")
    index = xml(client.simulate_get("/sitemap.xml"))
    assert index.tag == f"{SM}sitemapindex"
    numbers = sorted({(job["id"] - 1) // 2 + 1 for job in jobs})
    locs = [s.findtext(f"{SM}loc") for s in index.iter(f"{SM}sitemap")]
    assert locs == [f"{DEFAULT_LISTEN_URL}/sitemaps/jobs-{n}.xml" for n in numbers]
    urls = sitemap_urls(client)
    assert sorted(urls) == sorted(page(job["id"]) for job in jobs)
    for job in jobs:
        url = urls[page(job["id"])]
        assert url.findtext(f"{SM}lastmod") == job["updatedAt"]
        links = {a.get("hreflang"): a.get("href") for a in url.iter(f"{XHTML}link")}
        assert links == {"en": page(job["id"]), "fr": page(job["id"], "fr")}
        assert all(a.get("rel") == "alternate" for a in url.iter(f"{XHTML}link"))


def test_a_job_leaves_the_sitemap_once_it_is_not_open(
    client: falcon.testing.TestClient,
    api: Any,
    employer: Any,
    sessions: sessionmaker[Session],
    clock: Clock,
    small: None,
) -> None:
    kept = active(api, employer)
    archived, deleted, removed = (active(api, employer) for _ in range(3))
    expiring = active(api, employer, closeDate=(clock.today + timedelta(days=1)).isoformat())
    everyone = [kept, archived, deleted, removed, expiring]
    assert sorted(sitemap_urls(client)) == sorted(page(j["id"]) for j in everyone)

    put = api.put(f"{JOBS}/{archived['id']}", json={"status": "archived"}, key=employer.key)
    assert put.status_code == 200, put.text
    assert api.delete(f"{JOBS}/{deleted['id']}", key=employer.key).status_code == 204
    take_down(api, sessions, removed["id"])
    with sessions() as s:
        assert upkeep.expire(s, today=clock.today + timedelta(days=2)) == 1
        s.commit()

    assert sorted(sitemap_urls(client)) == [page(kept["id"])]


def test_a_chunk_without_an_open_job_is_not_found(
    client: falcon.testing.TestClient, api: Any, employer: Any, small: None
) -> None:
    job = active(api, employer)
    chunk = (job["id"] - 1) // 2 + 1
    assert client.simulate_get(f"/sitemaps/jobs-{chunk}.xml").status_code == 200
    for number in (chunk + 1, 2**31, 10**12):
        problem(client.simulate_get(f"/sitemaps/jobs-{number}.xml"), 404, "not_found")
    for name in ("jobs-0.xml", "jobs-x.xml", "jobs--1.xml"):
        problem(client.simulate_get(f"/sitemaps/{name}"), 404, "not_found")


def test_a_chunk_is_streamed_and_answers_head_without_a_body(
    client: falcon.testing.TestClient, api: Any, employer: Any, small: None
) -> None:
    job = active(api, employer)
    path = f"/sitemaps/jobs-{(job['id'] - 1) // 2 + 1}.xml"
    result = client.simulate_get(path)
    assert result.status_code == 200 and "content-length" not in result.headers
    head = client.simulate_head(path)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["etag"] == result.headers["etag"]


# --- conditional GET -------------------------------------------------------------------------


READS = ["/sitemap.xml"]


@pytest.mark.parametrize("path", READS)
def test_an_unchanged_read_is_a_304_by_etag_or_date_and_a_change_makes_it_200(
    later: falcon.testing.TestClient, api: Any, employer: Any, path: str
) -> None:
    client = later
    job = active(api, employer)
    first = client.simulate_get(path)
    assert first.status_code == 200, first.text
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert etag.startswith('"') and not etag.startswith("W/")  # strong
    stamp = datetime.fromisoformat(job["updatedAt"]).replace(microsecond=0)
    assert modified == format_datetime(stamp, usegmt=True)
    for headers in (
        {"If-None-Match": etag},
        {"If-None-Match": f'"other", W/{etag}'},
        {"If-Modified-Since": modified},
        {"If-Modified-Since": format_datetime(stamp + timedelta(hours=1), usegmt=True)},
    ):
        again = client.simulate_get(path, headers=headers)
        assert again.status_code == 304, headers
        assert again.content == b"" and again.headers["etag"] == etag
    older = format_datetime(stamp - timedelta(seconds=1), usegmt=True)
    assert client.simulate_get(path, headers={"If-Modified-Since": older}).status_code == 200
    assert client.simulate_get(path, headers={"If-None-Match": '"other"'}).status_code == 200
    # If-None-Match decides when both are sent (RFC 9110 section 13.2.2).
    both = {"If-None-Match": '"other"', "If-Modified-Since": modified}
    assert client.simulate_get(path, headers=both).status_code == 200
    nonsense = {"If-Modified-Since": "yesterday"}
    assert client.simulate_get(path, headers=nonsense).status_code == 200

    changed = api.put(f"{JOBS}/{job['id']}", json={"title": "Head Baker"}, key=employer.key)
    assert changed.status_code == 200, changed.text
    after = client.simulate_get(path, headers={"If-None-Match": etag})
    assert after.status_code == 200 and after.headers["etag"] != etag


def test_an_empty_index_is_a_valid_index(client: falcon.testing.TestClient) -> None:
    index = xml(client.simulate_get("/sitemap.xml"))
    assert list(index) == []
