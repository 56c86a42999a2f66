"""C15 Reach: robots.txt, the sitemap index and its chunks, and the three feeds of open jobs.

Through falcon's test client checking each answer against openapi.json, on both databases (the
`engine` fixture). The chunk size and the feeds' batch are lowered so a few jobs make several
chunks and batches.
"""

from __future__ import annotations

import dataclasses
import json
import re
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
from tests.factories import JOBS, create_job, entries, jobs_to_search, problem, take_down

SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XHTML = "{http://www.w3.org/1999/xhtml}"
ATOM = "{http://www.w3.org/2005/Atom}"
ATOM_TYPE = "application/atom+xml"
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


def feed_ids(client: falcon.testing.TestClient, path: str = "/feeds/jobs.json") -> list[int]:
    result = client.simulate_get(path)
    assert result.status_code == 200, result.text
    return [int(item["id"]) for item in json.loads(result.content)["items"]]


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
    feed = json.loads(client.simulate_get("/feeds/jobs.json", headers=host).content)
    assert feed["feed_url"] == f"{BASE}/feeds/jobs.json"
    assert [i["url"] for i in feed["items"]] == [page(job["id"], base=BASE)]


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


def test_a_job_leaves_the_sitemap_and_the_feeds_once_it_is_not_open(
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
    assert sorted(feed_ids(client)) == sorted(j["id"] for j in everyone)

    put = api.put(f"{JOBS}/{archived['id']}", json={"status": "archived"}, key=employer.key)
    assert put.status_code == 200, put.text
    assert api.delete(f"{JOBS}/{deleted['id']}", key=employer.key).status_code == 204
    take_down(api, sessions, removed["id"])
    with sessions() as s:
        assert upkeep.expire(s, today=clock.today + timedelta(days=2)) == 1
        s.commit()

    assert sorted(sitemap_urls(client)) == [page(kept["id"])]
    for path in ("/feeds/jobs.json", "/feeds/jobs.json?lang=fr"):
        assert feed_ids(client, path) == [kept["id"]]
    indeed = xml(client.simulate_get("/feeds/indeed.xml"))
    assert [j.findtext("referencenumber") for j in indeed.iter("job")] == [str(kept["id"])]
    atom = xml(client.simulate_get("/feeds/jobs.atom"), "application/atom+xml")
    assert [e.findtext(f"{ATOM}id") for e in atom.iter(f"{ATOM}entry")] == [
        f"{DEFAULT_LISTEN_URL}/jobs/{kept['id']}"
    ]


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


READS = ["/sitemap.xml", "/feeds/jobs.json", "/feeds/jobs.atom", "/feeds/indeed.xml"]


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


@pytest.mark.parametrize("path", READS[1:])
def test_a_feed_read_within_the_lag_of_a_change_is_never_confirmed(
    client: falcon.testing.TestClient,
    later: falcon.testing.TestClient,
    api: Any,
    employer: Any,
    path: str,
) -> None:
    """C15: a write stamped before the latest change may still be committing (C10), so a copy
    made within CHANGE_FEED_LAG_SECONDS of the latest change gets an ETag nothing matches."""
    active(api, employer)
    first = client.simulate_get(path)
    etag = first.headers["etag"]
    assert "last-modified" not in first.headers  # nor can a date confirm it
    for present in (client, later):
        assert present.simulate_get(path, headers={"If-None-Match": etag}).status_code == 200
    settled = later.simulate_get(path).headers["etag"]
    assert settled != etag
    assert later.simulate_get(path, headers={"If-None-Match": settled}).status_code == 304


def test_the_feeds_validators_differ_by_language_and_filters(
    later: falcon.testing.TestClient, api: Any, employer: Any
) -> None:
    client = later
    active(api, employer)
    tags = {
        client.simulate_get(path).headers["etag"]
        for path in (
            "/feeds/jobs.atom",
            "/feeds/jobs.atom?lang=fr",
            "/feeds/jobs.atom?q=baker",
            "/feeds/jobs.json",
            "/feeds/jobs.json?lang=fr",
        )
    }
    assert len(tags) == 5


# --- JSON Feed -------------------------------------------------------------------------------


def test_json_feed_lists_each_open_job_in_batches(
    client: falcon.testing.TestClient, api: Any, employer: Any, small: None
) -> None:
    jobs = [active(api, employer, title=f"Baker {n}") for n in range(5)]
    result = client.simulate_get("/feeds/jobs.json")
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/feed+json"
    assert result.headers["content-language"] == "en-CA"
    assert "content-length" not in result.headers  # streamed
    feed = json.loads(result.content)
    assert feed["version"] == "https://jsonfeed.org/version/1.1"
    assert feed["title"] == "Open jobs" and feed["language"] == "en-CA"
    assert feed["feed_url"] == f"{DEFAULT_LISTEN_URL}/feeds/jobs.json"
    assert [int(i["id"]) for i in feed["items"]] == [j["id"] for j in jobs]  # by id, once
    item, job = feed["items"][0], jobs[0]
    assert item == {
        "id": str(job["id"]),
        "url": page(job["id"]),
        "title": "Baker 0",
        "content_html": "<p>Bake <strong>bread</strong>.</p>",
        "date_published": "2026-03-10T00:00:00-04:00",  # Toronto, after the DST change
        "date_modified": job["updatedAt"],
        "authors": [{"name": "Maple Corp"}],
        "tags": ["Hospitality & Tourism"],
    }


def test_json_feed_in_french_uses_the_translation_where_there_is_one(
    client: falcon.testing.TestClient, api: Any, employer: Any
) -> None:
    translated = active(api, employer, translation=FRENCH)
    english = active(api, employer, confidential=True)
    feed = json.loads(client.simulate_get("/feeds/jobs.json?lang=fr").content)
    assert feed["language"] == "fr-CA" and feed["title"] == "Offres d’emploi"
    assert feed["feed_url"] == f"{DEFAULT_LISTEN_URL}/feeds/jobs.json?lang=fr"
    first, second = feed["items"]
    assert first["title"] == FRENCH["title"] and first["content_html"] == FRENCH["description"]
    assert first["url"] == page(translated["id"], "fr") and "language" not in first
    assert first["tags"] == ["Hôtellerie et tourisme"]
    assert second["title"] == "Senior Baker" and second["language"] == "en-CA"
    assert second["url"] == page(english["id"], "fr")
    assert second["authors"] == [{"name": "Employeur confidentiel"}]


@pytest.mark.parametrize("path", ["/feeds/jobs.json?lang=de", "/feeds/jobs.atom?lang=EN"])
def test_an_unknown_language_is_invalid(client: falcon.testing.TestClient, path: str) -> None:
    assert entries(client.simulate_get(path), 400, "invalid_query") == [("lang", "out_of_range")]


# --- Indeed ----------------------------------------------------------------------------------


def test_indeed_feed_has_the_source_and_a_job_element_per_open_job(
    client: falcon.testing.TestClient, api: Any, employer: Any
) -> None:
    salary = {"amount": 60000, "maxAmount": 70000, "period": {"id": 1}, "plusCommission": False}
    job = active(api, employer, salary=salary, referenceId="BAK-1")
    source = xml(client.simulate_get("/feeds/indeed.xml"))
    assert source.tag == "source"
    assert source.findtext("publisher") == "127.0.0.1"
    assert source.findtext("publisherurl") == f"{DEFAULT_LISTEN_URL}/"
    stamp = datetime.fromisoformat(job["updatedAt"]).replace(microsecond=0)
    assert source.findtext("lastBuildDate") == format_datetime(stamp, usegmt=True)
    [found] = source.findall("job")
    assert {child.tag: child.text for child in found} == {
        "title": "Senior Baker",
        "date": "Tue, 10 Mar 2026 00:00:00 -0400",
        "referencenumber": str(job["id"]),
        "url": page(job["id"]),
        "company": "Maple Corp",
        "city": "Toronto",
        "state": "ON",
        "country": "CA",
        "description": "<p>Bake <strong>bread</strong>.</p>",
        "salary": "$60,000–$70,000 a year",
        "jobtype": "fulltime",
        "category": "Hospitality & Tourism",
    }
    assert b"<description><![CDATA[<p>Bake" in client.simulate_get("/feeds/indeed.xml").content


def test_indeed_feed_names_no_employer_of_a_confidential_job_and_escapes_everything(
    client: falcon.testing.TestClient, api: Any, employer: Any
) -> None:
    title = 'Cook ]]> <b>&amp; "chef"</b> ]]]]>'
    active(
        api,
        employer,
        title=title,
        confidential=True,
        salary=...,
        locations=[{"description": "Quebec"}],
        categories=[{"id": 12}, {"id": 22}],
        positionType={"id": 5},
        aiScreening=...,
        existingVacancy=...,
    )
    content = client.simulate_get("/feeds/indeed.xml").content
    [found] = ET.fromstring(content).findall("job")
    assert found.findtext("title") == title
    assert found.find("company") is None and b"Maple Corp" not in content
    assert found.find("city") is None and found.findtext("state") == "QC"
    assert found.find("salary") is None and found.findtext("jobtype") == "volunteer"
    assert found.findtext("category") == "Hospitality & Tourism, Retail"


@pytest.mark.parametrize(
    ("workplace", "flag"),
    [("remote", "Fully remote"), ("hybrid", "Hybrid remote"), ("onSite", None)],
)
def test_indeed_feed_flags_remote_and_hybrid_jobs(
    client: falcon.testing.TestClient, api: Any, employer: Any, workplace: str, flag: str | None
) -> None:
    active(api, employer, workplaceType=workplace)
    [found] = xml(client.simulate_get("/feeds/indeed.xml")).findall("job")
    assert found.findtext("remotetype") == flag


# --- Atom ------------------------------------------------------------------------------------


def test_atom_feed_has_an_entry_per_open_job(
    client: falcon.testing.TestClient, api: Any, employer: Any
) -> None:
    job = active(api, employer, title="Baker & <Pastry>")
    feed = xml(client.simulate_get("/feeds/jobs.atom"), "application/atom+xml")
    assert feed.get("{http://www.w3.org/XML/1998/namespace}lang") == "en-CA"
    assert feed.findtext(f"{ATOM}id") == f"{DEFAULT_LISTEN_URL}/feeds/jobs.atom"
    assert feed.findtext(f"{ATOM}title") == "Open jobs"
    self_link = feed.find(f"{ATOM}link")
    assert self_link is not None and self_link.get("rel") == "self"
    [entry] = feed.findall(f"{ATOM}entry")
    assert entry.findtext(f"{ATOM}title") == "Baker & <Pastry>"
    assert entry.findtext(f"{ATOM}updated") == job["updatedAt"]
    assert entry.findtext(f"{ATOM}published") == "2026-03-10T00:00:00-04:00"
    link = entry.find(f"{ATOM}link")
    assert link is not None and link.get("href") == page(job["id"])
    assert entry.findtext(f"{ATOM}author/{ATOM}name") == "Maple Corp"
    content = entry.find(f"{ATOM}content")
    assert content is not None and content.get("type") == "html"
    assert content.text == "<p>Bake <strong>bread</strong>.</p>"
    [category] = entry.findall(f"{ATOM}category")
    assert category.get("term") == "12" and category.get("label") == "Hospitality & Tourism"


def test_atom_feed_takes_the_public_search_filters(
    client: falcon.testing.TestClient, api: Any, employer: Any, small: None
) -> None:
    toronto = active(api, employer, title="Bread baker", referenceId="TOR-1")
    montreal = active(
        api,
        employer,
        title="Pâtissière",
        locations=[{"description": "Montréal, QC"}],
        categories=[{"id": 22}],
    )
    other = active(api, employer, title="Driver", categories=[{"id": 29}])

    def found(query: str) -> list[str | None]:
        feed = xml(client.simulate_get(f"/feeds/jobs.atom?{query}"), "application/atom+xml")
        return [e.findtext(f"{ATOM}id") for e in feed.iter(f"{ATOM}entry")]

    def ids(*jobs: dict[str, Any]) -> list[str | None]:
        return [f"{DEFAULT_LISTEN_URL}/jobs/{j['id']}" for j in jobs]

    assert found("") == ids(toronto, montreal, other)
    assert found("q=BAKER") == ids(toronto)
    assert found("q=tor-") == ids(toronto)  # the referenceId, as the API's q (C6)
    assert found("q=PÂTISS") == ids(montreal)
    assert found("q=%25") == []  # literal
    assert found("category=22") == ids(montreal)
    assert found("province=QC") == ids(montreal)
    assert found("province=ON&category=12") == ids(toronto)
    assert found("province=ON&q=driver") == ids(other)
    assert found("q=&category=&province=") == ids(toronto, montreal, other)  # empty: absent
    feed = client.simulate_get("/feeds/jobs.atom?q=baker&lang=fr&unknown=1")
    self_link = xml(feed, "application/atom+xml").find(f"{ATOM}link")
    assert self_link is not None
    assert self_link.get("href") == f"{DEFAULT_LISTEN_URL}/feeds/jobs.atom?q=baker&lang=fr"


def test_a_search_page_address_on_the_feed_gives_the_same_jobs(
    client: falcon.testing.TestClient, api: Any, employer: Any, clock: Clock
) -> None:
    """Every filter of the search page (C17), read as the page reads it: `/jobs` replaced by
    `/feeds/jobs.atom` in a search's address gives the jobs of its results."""
    jobs = jobs_to_search(api, employer, clock)
    old, remote, vancouver = jobs["old"], jobs["remote"], jobs["vancouver"]
    place = vancouver["locations"][0]["id"]

    def page_ids(query: str) -> set[str]:
        page = client.simulate_get("/jobs", query_string=query)
        assert page.status_code == 200, page.text
        return set(re.findall(r'<h3><a href="/jobs/(\d+)\?', page.text))

    def feed_ids(query: str) -> set[str]:
        feed = xml(client.simulate_get("/feeds/jobs.atom", query_string=query), ATOM_TYPE)
        return {
            (e.findtext(f"{ATOM}id") or "").rsplit("/", 1)[1] for e in feed.iter(f"{ATOM}entry")
        }

    queries = {
        "positionType=3": {remote["id"]},
        "workplaceType=remote": {remote["id"]},
        "minPay=83200": {remote["id"]},
        "days=5": {remote["id"], vancouver["id"]},
        f"place={place}": {vancouver["id"]},
        "q=baker&province=BC&days=30": {vancouver["id"]},
        "category=12&minPay=50000": {old["id"]},  # the baker is paid 48,000
    }
    for query, expected in queries.items():
        assert feed_ids(query) == page_ids(query) == {str(i) for i in expected}, query
    feed = xml(
        client.simulate_get("/feeds/jobs.atom?days=5&positionType=3&q=dev&lang=fr"), ATOM_TYPE
    )
    assert feed.findtext(f"{ATOM}id") == (
        f"{DEFAULT_LISTEN_URL}/feeds/jobs.atom?q=dev&positionType=3&days=5&lang=fr"
    )  # the filters in the search page's order


def test_a_feed_of_the_last_days_changes_its_etag_with_the_day(
    later: CheckedClient, api: Any, employer: Any, clock: Clock
) -> None:
    active(api, employer)
    today = later.simulate_get("/feeds/jobs.atom?days=7")
    assert later.simulate_get("/feeds/jobs.atom?days=7").headers["etag"] == today.headers["etag"]
    clock.today += timedelta(days=1)
    tomorrow = later.simulate_get(
        "/feeds/jobs.atom?days=7", headers={"If-None-Match": today.headers["etag"]}
    )
    assert tomorrow.status_code == 200  # the same jobs may no longer be the last 7 days'


def test_atom_feed_refuses_what_no_search_means(client: falcon.testing.TestClient) -> None:
    result = client.simulate_get("/feeds/jobs.atom?q=a%00b&category=99&province=on")
    assert entries(result, 400, "invalid_query") == [
        ("q", "invalid_format"),
        ("category", "unknown_category"),
        ("province", "out_of_range"),
    ]
    result = client.simulate_get("/feeds/jobs.atom?category=food")
    assert entries(result, 400, "invalid_query") == [("category", "invalid_type")]
    result = client.simulate_get(
        "/feeds/jobs.atom?place=999999&positionType=9&workplaceType=office&minPay=lots&days=0"
    )
    assert entries(result, 400, "invalid_query") == [
        ("positionType", "unknown_position_type"),
        ("workplaceType", "out_of_range"),
        ("minPay", "invalid_type"),
        ("days", "out_of_range"),
        ("place", "unknown_location"),
    ]


def test_atom_feed_in_french(client: falcon.testing.TestClient, api: Any, employer: Any) -> None:
    job = active(api, employer, translation=FRENCH)
    english = active(api, employer)
    feed = xml(client.simulate_get("/feeds/jobs.atom?lang=fr"), "application/atom+xml")
    assert feed.findtext(f"{ATOM}title") == "Offres d’emploi"
    first, second = feed.findall(f"{ATOM}entry")
    assert first.findtext(f"{ATOM}title") == FRENCH["title"]
    link = first.find(f"{ATOM}link")
    assert link is not None and link.get("href") == page(job["id"], "fr")
    title = second.find(f"{ATOM}title")
    assert title is not None and title.text == "Senior Baker"
    assert title.get("{http://www.w3.org/XML/1998/namespace}lang") == "en-CA"
    assert english["id"] > job["id"]


def test_an_empty_feed_is_a_valid_feed(client: falcon.testing.TestClient) -> None:
    feed = json.loads(client.simulate_get("/feeds/jobs.json").content)
    assert feed["items"] == []
    assert xml(client.simulate_get("/feeds/indeed.xml")).findall("job") == []
    atom = xml(client.simulate_get("/feeds/jobs.atom"), "application/atom+xml")
    assert atom.findall(f"{ATOM}entry") == []
    index = xml(client.simulate_get("/sitemap.xml"))
    assert list(index) == []
