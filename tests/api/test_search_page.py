"""C17 Search and browse: GET / and GET /jobs, the public search page, in English and French.

Through falcon's test client checking each answer against openapi.json, on both databases (the
`engine` fixture). Each test reads the page as a person would: the result titles and links,
the messages, the paging links and the robots rule.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp
from models.db.entities import Job
from models.jobs import browse
from tests.conftest import CheckedClient, Clock
from tests.factories import JOBS, create_job, jobs_to_search, take_down

TITLE = re.compile(r'<h3><a href="([^"]+)"[^>]*>([^<]+)</a></h3>')
NOINDEX = '<meta name="robots" content="noindex">'


@pytest.fixture
def client(app: WsgiApp) -> CheckedClient:
    return CheckedClient(app)


def active(api: Any, employer: Any, **overrides: Any) -> dict[str, Any]:
    return create_job(api, employer, **{"status": "active", **overrides})


def titles(result: Any) -> list[str]:
    assert result.status_code == 200, result.text
    return [unescape(t) for _href, t in TITLE.findall(result.text)]


def test_the_search_page_lists_open_jobs_newest_first(
    client: CheckedClient, api: Any, employer: Any, clock: Clock
) -> None:
    clock.today -= timedelta(days=2)
    active(api, employer, title="Older baker")
    clock.today += timedelta(days=2)
    newer = active(api, employer, title="Newer baker")
    create_job(api, employer, title="Draft baker")  # a draft is not public
    for path in ("/", "/jobs"):
        page = client.simulate_get(path)
        assert titles(page) == ["Newer baker", "Older baker"]
        assert page.headers["content-language"] == "en-CA"
        assert '<form method="get" action="/jobs" role="search">' in page.text
        assert '<label for="q">' in page.text and 'id="q"' in page.text
        assert f'href="/jobs/{newer["id"]}?lang=en"' in page.text
        assert "Maple Corp" in page.text and "Toronto, ON" in page.text
        assert "$52,000 a year" in page.text and "On site" in page.text
        assert '<option value="7">In the last 7 days</option>' in page.text
        assert NOINDEX not in page.text


def test_the_api_job_list_is_unchanged(client: CheckedClient, api: Any, employer: Any) -> None:
    active(api, employer)
    listed = api.get(JOBS, key=employer.key)
    assert listed.status_code == 200 and listed.json["paging"]["total"] == 1


def test_a_confidential_employer_is_not_named(
    client: CheckedClient, api: Any, employer: Any
) -> None:
    active(api, employer, confidential=True)
    page = client.simulate_get("/jobs")
    assert titles(page) == ["Senior Baker"]
    assert "Maple Corp" not in page.text


def test_a_taken_down_job_leaves_the_results(
    client: CheckedClient, api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(api, employer, title="Fee baker")
    active(api, employer, title="Honest baker")
    take_down(api, sessions, job["id"])
    assert titles(client.simulate_get("/jobs")) == ["Honest baker"]


def test_each_filter_narrows_the_results(
    client: CheckedClient, api: Any, employer: Any, clock: Clock
) -> None:
    jobs_to_search(api, employer, clock)
    cases = {
        "q=developer": ["Remote developer"],
        "q=DEVELOPER": ["Remote developer"],
        "category=12": ["Vancouver baker", "Old cook"],
        "province=BC": ["Vancouver baker"],
        "positionType=3": ["Remote developer"],
        "workplaceType=remote": ["Remote developer"],
        "minPay=50000": ["Remote developer", "Old cook"],
        "minPay=83200": ["Remote developer"],
        "minPay=83201": [],
        "days=5": ["Vancouver baker", "Remote developer"],
        "category=12&province=ON": ["Old cook"],
    }
    for query, expected in cases.items():
        assert titles(client.simulate_get("/jobs", query_string=query)) == expected, query


def test_a_place_narrows_to_its_location_and_each_result_links_its_places(
    client: CheckedClient, api: Any, employer: Any
) -> None:
    active(api, employer, title="Vancouver baker", locations=[{"description": "Vancouver, BC"}])
    toronto = active(api, employer, title="Toronto baker")
    place = toronto["locations"][0]["id"]
    page = client.simulate_get("/jobs")
    assert f'href="/jobs?place={place}&amp;lang=en"' in page.text
    narrowed = client.simulate_get("/jobs", query_string=f"place={place}")
    assert titles(narrowed) == ["Toronto baker"]
    assert "Jobs in Toronto, ON" in narrowed.text
    form = narrowed.text[narrowed.text.find("<form") :]
    assert '<a href="/jobs?lang=en">Any place</a>' in narrowed.text, form[:500]


def test_sort_by_closing_soonest(client: CheckedClient, api: Any, employer: Any) -> None:
    active(api, employer, title="Late", closeDate="2026-05-01")
    active(api, employer, title="Soon", closeDate="2026-03-20")
    assert titles(client.simulate_get("/jobs", query_string="sort=closing")) == ["Soon", "Late"]
    assert titles(client.simulate_get("/jobs")) == ["Soon", "Late"]  # newest: the higher id


def test_pages_link_each_other_and_filtered_pages_past_the_first_are_noindex(
    client: CheckedClient, api: Any, employer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browse, "PAGE_SIZE", 2)
    for n in range(5):
        active(api, employer, title=f"Baker {n}")
    first = client.simulate_get("/jobs", query_string="q=baker")
    assert titles(first) == ["Baker 4", "Baker 3"]
    assert '<link rel="next" href="/jobs?q=baker&amp;page=2&amp;lang=en">' in first.text
    assert 'rel="prev"' not in first.text and NOINDEX not in first.text
    second = client.simulate_get("/jobs", query_string="q=baker&page=2")
    assert titles(second) == ["Baker 2", "Baker 1"]
    assert '<a href="/jobs?q=baker&amp;lang=en" rel="prev">' in second.text
    assert NOINDEX in second.text
    last = client.simulate_get("/jobs", query_string="q=baker&page=3")
    assert titles(last) == ["Baker 0"] and 'rel="next"' not in last.text
    unfiltered = client.simulate_get("/jobs", query_string="page=2")
    assert titles(unfiltered) == ["Baker 2", "Baker 1"] and NOINDEX not in unfiltered.text
    canonical = '<link rel="canonical" href="http://127.0.0.1:8000/jobs?page=2&amp;lang=en">'
    assert canonical in unfiltered.text


def test_no_match_is_the_empty_state(client: CheckedClient, api: Any, employer: Any) -> None:
    active(api, employer)
    page = client.simulate_get("/jobs", query_string="q=astronaut")
    assert titles(page) == []
    assert "No open job matches this search." in page.text
    assert NOINDEX in page.text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("q=a%00b", "The search words hold characters that no search can use."),
        ("category=99", "Choose a category from the list."),
        ("category=food", "Choose a category from the list."),
        ("province=on", "Choose a province or territory from the list."),
        ("place=999999999", "This place is not one of the listed locations."),
        ("place=x", "This place is not one of the listed locations."),
        ("positionType=9", "Choose a position type from the list."),
        ("workplaceType=office", "Choose on site, hybrid or remote."),
        ("minPay=lots", "Enter the minimum pay as whole dollars a year"),
        ("minPay=0", "Enter the minimum pay as whole dollars a year"),
        ("days=366", "Enter a number of days from 1 to 365."),
        ("sort=oldest", "Choose newest first or closing soonest."),
        ("page=0", "The page number must be a whole number from 1 to 500."),
        ("page=501", "The page number must be a whole number from 1 to 500."),
        ("q=%FF", "The search words hold characters that no search can use."),
        ("lang=fr&page=x", "La page doit être un nombre entier de 1 à 500."),
    ],
)
def test_a_filter_no_search_means_is_a_400_page(
    client: CheckedClient, query: str, message: str
) -> None:
    page = client.simulate_get("/jobs", query_string=query)
    assert page.status_code == 400
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert message in unescape(page.text)
    assert 'role="alert"' in page.text and NOINDEX in page.text
    assert '<form method="get" action="/jobs"' in page.text


def test_the_form_keeps_what_was_typed(client: CheckedClient) -> None:
    page = client.simulate_get("/jobs", query_string="q=%3Cb%3E&minPay=lots&province=QC")
    assert page.status_code == 400
    assert 'value="&lt;b&gt;"' in page.text and 'value="lots"' in page.text
    assert '<option value="QC" selected>' in page.text


def test_the_page_in_french(client: CheckedClient, api: Any, employer: Any) -> None:
    active(api, employer, title="Senior Baker")
    for ask in ({"query_string": "lang=fr"}, {"headers": {"Accept-Language": "fr-CA"}}):
        page = client.simulate_get("/jobs", **ask)
        assert page.headers["content-language"] == "fr-CA"
        assert '<html lang="fr-CA">' in page.text
        assert "Trouver un emploi" in page.text
        assert "52 000 $ par année" in unescape(page.text).replace("\u202f", " ").replace(
            "\xa0", " "
        )
        assert '<input type="hidden" name="lang" value="fr">' in page.text
        assert titles(page) == ["Senior Baker"]
    wrong = client.simulate_get("/jobs", query_string="lang=fr&days=0")
    assert wrong.status_code == 400
    assert "Entrez un nombre de jours de 1 à 365." in unescape(wrong.text)


def test_the_page_links_the_other_language(client: CheckedClient) -> None:
    page = client.simulate_get("/jobs", query_string="q=chef&lang=fr")
    alternate = (
        '<link rel="alternate" hreflang="en" href="http://127.0.0.1:8000/jobs?q=chef&amp;lang=en">'
    )
    assert alternate in page.text


def test_the_results_link_the_same_search_by_email_and_as_a_feed(
    client: CheckedClient, api: Any, employer: Any
) -> None:
    active(api, employer, title="Baker")
    search = "q=baker&province=ON&minPay=50000"
    for query in (search, "q=astronaut"):  # with results, and in the empty state
        page = client.simulate_get("/jobs", query_string=f"{query}&sort=closing&lang=fr")
        assert page.status_code == 200
        same = query.replace("&", "&amp;") + "&amp;lang=fr"
        assert f'<a href="/alerts/new?{same}">Recevoir ces offres par courriel</a>' in page.text
        assert f'<a href="/feeds/jobs.atom?{same}" type="application/atom+xml">' in page.text
        assert (
            f'<link rel="alternate" type="application/atom+xml" href="/feeds/jobs.atom?{same}"'
            in page.text
        )
    sign_up = client.simulate_get("/alerts/new", query_string=f"{search}&lang=fr")
    assert sign_up.status_code == 200 and "Recevoir les offres par courriel" in sign_up.text
    feed = client.simulate_get("/feeds/jobs.atom", query_string=search)
    assert feed.status_code == 200 and feed.text.count("<entry>") == 1
    wrong = client.simulate_get("/jobs", query_string="days=0")
    assert "/alerts/new" not in wrong.text  # no search, nothing to follow


def test_an_unknown_path_beside_it_is_still_a_page_404(client: CheckedClient) -> None:
    assert client.simulate_get("/jobs/abc").status_code == 404
    assert client.simulate_post("/jobs").status_code == 405


def test_the_jobs_are_read_with_their_places_on_either_database(
    client: CheckedClient, api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = active(
        api, employer, locations=[{"description": "Toronto, ON"}, {"description": "Vancouver, BC"}]
    )
    with sessions() as s:
        s.execute(
            update(Job).where(Job.id == job["id"]).values(salary_amount=None, salary_period_id=None)
        )
        s.commit()
    page = client.simulate_get("/jobs")
    assert "Toronto, ON" in page.text and "Vancouver, BC" in page.text
    assert titles(client.simulate_get("/jobs", query_string="minPay=1")) == []
