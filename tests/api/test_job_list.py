"""C6 job list: paging links that carry the filters, strict query parameters, the order, and
`q` matching alike on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from models.core.settings import Settings
from models.jobs import upkeep
from tests.conftest import Api
from tests.factories import JOBS, create_job, entries, job_body

HOST = "http://127.0.0.1:8000"


def listing(api: Any, account: Any, **params: Any) -> dict[str, Any]:
    result = api.get(JOBS, key=account.key, params=params)
    assert result.status_code == 200, result.text
    body: dict[str, Any] = result.json
    return body


def titles(body: dict[str, Any]) -> list[str]:
    return [j["title"] for j in body["data"]]


def test_an_empty_list_has_zero_pages_and_no_links(api: Any, employer: Any) -> None:
    """C6: pages = ceil(total / pageSize), 0 when there is nothing."""
    body = listing(api, employer)
    assert body == {
        "data": [],
        "paging": {
            "total": 0,
            "page": 1,
            "pages": 0,
            "pageSize": 10,
            "previous": None,
            "next": None,
        },
    }


def test_no_shared_cache_keeps_an_employers_list(api: Any, employer: Any) -> None:
    """The list answers for the key's employer, and the key is no Authorization header that
    caches would know to keep apart: private, as GET of one job is (C2, C6)."""
    result = api.get(JOBS, key=employer.key)
    assert result.status_code == 200
    assert result.headers["Cache-Control"] == "private, no-cache"


def test_defaults_are_page_1_of_10_with_absolute_links(api: Any, employer: Any) -> None:
    for i in range(12):
        create_job(api, employer, title=f"Job {i:02}")
    first = listing(api, employer)
    assert len(first["data"]) == 10
    assert first["paging"] == {
        "total": 12,
        "page": 1,
        "pages": 2,
        "pageSize": 10,
        "previous": None,
        "next": f"{HOST}{JOBS}?pageSize=10&page=2",
    }
    second = listing(api, employer, page=2)
    assert len(second["data"]) == 2
    assert second["paging"]["previous"] == f"{HOST}{JOBS}?pageSize=10&page=1"
    assert second["paging"]["next"] is None


def test_links_carry_q_status_page_size_and_page_in_that_order(api: Any, employer: Any) -> None:
    """C6: the query carries the supplied q and status, then pageSize and page, in that order."""
    for i in range(5):
        create_job(api, employer, title=f"Baker {i}", status="active")
    body = listing(api, employer, page=2, pageSize=2, status="active", q="baker")
    assert body["paging"]["previous"] == f"{HOST}{JOBS}?q=baker&status=active&pageSize=2&page=1"
    assert body["paging"]["next"] == f"{HOST}{JOBS}?q=baker&status=active&pageSize=2&page=3"
    only_status = listing(api, employer, pageSize=2, status="active")
    assert only_status["paging"]["next"] == f"{HOST}{JOBS}?status=active&pageSize=2&page=2"


def test_a_q_with_spaces_and_symbols_is_encoded_in_the_links(api: Any, employer: Any) -> None:
    for _ in range(3):
        create_job(api, employer, title="Pastry & Bread chef")
    body = listing(api, employer, q="y & b", pageSize=1)
    assert body["paging"]["next"] == f"{HOST}{JOBS}?q=y+%26+b&pageSize=1&page=2"
    follow = api.get(body["paging"]["next"].removeprefix(HOST), key=employer.key).json
    assert follow["paging"]["total"] == 3 and follow["paging"]["page"] == 2


def test_following_next_visits_every_job_once_in_order(api: Any, employer: Any) -> None:
    ids = [create_job(api, employer)["id"] for _ in range(7)]
    seen: list[int] = []
    link: str | None = f"{HOST}{JOBS}?pageSize=3"
    while link:
        body = api.get(link.removeprefix(HOST), key=employer.key).json
        seen += [j["id"] for j in body["data"]]
        link = body["paging"]["next"]
    assert seen == sorted(ids, reverse=True)


def test_a_page_past_the_last_is_200_and_empty_with_previous(api: Any, employer: Any) -> None:
    """C6: past the last page: 200, empty data, previous = page - 1, next null."""
    for _ in range(3):
        create_job(api, employer)
    body = listing(api, employer, page=5, pageSize=2)
    assert body["data"] == []
    assert body["paging"] == {
        "total": 3,
        "page": 5,
        "pages": 2,
        "pageSize": 2,
        "previous": f"{HOST}{JOBS}?pageSize=2&page=4",
        "next": None,
    }
    none_archived = listing(api, employer, page=2, status="archived")
    assert none_archived["paging"]["pages"] == 0 and none_archived["paging"]["next"] is None
    assert none_archived["paging"]["previous"] == (
        f"{HOST}{JOBS}?status=archived&pageSize=10&page=1"
    )


def test_order_is_publish_date_descending_then_id_descending(
    api: Any, employer: Any, clock: Any
) -> None:
    """C6: publishDate descending, then id descending (stable across pages)."""
    start = clock.today
    made: list[tuple[str, int]] = []
    for offset in (0, 2, 1, 2, 0):
        clock.today = start + timedelta(days=offset)
        job = create_job(api, employer)
        made.append((job["publishDate"], job["id"]))
    clock.today = start + timedelta(days=3)
    expected = [i for _d, i in sorted(made, reverse=True)]
    assert [j["id"] for j in listing(api, employer)["data"]] == expected
    paged = [j["id"] for p in (1, 2, 3) for j in listing(api, employer, pageSize=2, page=p)["data"]]
    assert paged == expected


def test_republishing_moves_a_job_to_the_top(api: Any, employer: Any, clock: Any) -> None:
    old = create_job(api, employer, status="archived")
    create_job(api, employer)
    clock.today = date(2026, 3, 11)
    api.put(f"{JOBS}/{old['id']}", json={"status": "active"}, key=employer.key)
    assert listing(api, employer)["data"][0]["id"] == old["id"]


def test_the_list_element_is_the_job_header(api: Any, employer: Any) -> None:
    """Interface: id, referenceId, employer, title, publishDate, locations, confidential, status;
    C10's updatedAt, C16's workplaceType and applicantLocations and C21's questions, as the
    job shows them."""
    job = create_job(api, employer, referenceId="H-1", confidential=True)
    (header,) = listing(api, employer)["data"]
    assert header == {
        k: job[k]
        for k in (
            "id",
            "referenceId",
            "employer",
            "title",
            "publishDate",
            "locations",
            "workplaceType",
            "applicantLocations",
            "questions",
            "confidential",
            "status",
            "updatedAt",
        )
    }


def test_status_filters(api: Any, employer: Any) -> None:
    for status in ("active", "active", "archived", "draft"):
        create_job(api, employer, status=status, title=status)
    assert titles(listing(api, employer, status="active")) == ["active", "active"]
    assert titles(listing(api, employer, status="archived")) == ["archived"]
    assert listing(api, employer)["paging"]["total"] == 4


def test_q_matches_title_or_reference_id_case_insensitively(api: Any, employer: Any) -> None:
    """C6: case-insensitive substring of title or referenceId."""
    create_job(api, employer, title="Senior BAKER")
    create_job(api, employer, title="Cashier", referenceId="bakery-77")
    create_job(api, employer, title="Driver")
    assert sorted(titles(listing(api, employer, q="bAkEr"))) == ["Cashier", "Senior BAKER"]
    assert titles(listing(api, employer, q="KERY-7")) == ["Cashier"]


@pytest.mark.parametrize(
    ("title", "q"),
    [("ÉCOLE DES CHEFS", "é"), ("école", "ÉCOLE"), ("Straße Koch", "STRASSE"), ("ΣΟΦΙΑ", "σοφια")],
)
def test_q_is_unicode_aware_alike_on_both_databases(
    api: Any, employer: Any, title: str, q: str
) -> None:
    """C6: Unicode-aware and the same on SQLite and PostgreSQL (é finds É)."""
    create_job(api, employer, title=title)
    create_job(api, employer, title="Other")
    assert titles(listing(api, employer, q=q)) == [title]


def test_percent_and_underscore_in_q_are_literal(api: Any, employer: Any) -> None:
    """C6: % and _ are literal characters."""
    for title in ("100% remote", "1000 remote", "night_shift", "nightXshift", "back\\slash"):
        create_job(api, employer, title=title)
    assert titles(listing(api, employer, q="%")) == ["100% remote"]
    assert titles(listing(api, employer, q="0%")) == ["100% remote"]
    assert titles(listing(api, employer, q="t_s")) == ["night_shift"]
    assert titles(listing(api, employer, q="_")) == ["night_shift"]
    assert titles(listing(api, employer, q="\\")) == ["back\\slash"]


@pytest.mark.parametrize(
    ("params", "name", "code"),
    [
        ({"pageSize": "0"}, "pageSize", "out_of_range"),
        ({"pageSize": "101"}, "pageSize", "out_of_range"),
        ({"pageSize": "-1"}, "pageSize", "invalid_type"),
        ({"pageSize": "1.5"}, "pageSize", "invalid_type"),
        ({"pageSize": "ten"}, "pageSize", "invalid_type"),
        ({"page": "abc"}, "page", "invalid_type"),
        ({"page": "0"}, "page", "out_of_range"),
        ({"page": "2147483648"}, "page", "out_of_range"),
        ({"page": "99999999999"}, "page", "invalid_type"),
        ({"page": " 1"}, "page", "invalid_type"),
        ({"status": "open"}, "status", "out_of_range"),
        ({"status": "ACTIVE"}, "status", "out_of_range"),
        ({"q": "a\x00b"}, "q", "invalid_format"),
        ({"q": "cook\x1fup"}, "q", "invalid_format"),  # the title/referenceId joint
        ({"q": "a\tb"}, "q", "invalid_format"),
        ({"q": "a\x7f"}, "q", "invalid_format"),
    ],
)
def test_a_malformed_or_out_of_range_parameter_is_400_naming_it(
    api: Any, employer: Any, params: dict[str, str], name: str, code: str
) -> None:
    """C1/C6: 400 invalid_query, whose errors name the parameter."""
    result = api.get(JOBS, key=employer.key, params=params)
    assert entries(result, 400, "invalid_query") == [(name, code)]
    assert name in result.json["detail"]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("q=%FF", "q"),
        ("q=%C0%80", "q"),  # an overlong NUL
        ("q=%ED%A0%80", "q"),  # a surrogate
        ("q=caf%C3", "q"),  # cut short
        ("q=cook&q=%FF", "q"),
        ("pageSize=10&q=%FF", "q"),  # not the first parameter
        ("%71=%FF", "q"),
        ("status=%FF", "status"),
        ("page=%FF", "page"),
        ("pageSize=1%FF", "pageSize"),
    ],
)
def test_a_parameter_that_is_not_utf_8_is_400_naming_it(
    api: Any, employer: Any, query: str, name: str
) -> None:
    """C1/C6: not a search for the U+FFFD falcon decodes it to, echoed in the links."""
    result = api.get(JOBS, key=employer.key, query_string=query)
    assert entries(result, 400, "invalid_query") == [(name, "invalid_format")]
    assert name in result.json["detail"]


def test_an_encoded_replacement_character_is_a_character_like_any_other(
    api: Any, employer: Any
) -> None:
    for title in ("Baker \ufffd one", "Baker \ufffd two", "Baker three"):
        create_job(api, employer, title=title)
    body = listing(api, employer, q="\ufffd", pageSize=1)
    assert body["paging"]["total"] == 2
    assert body["paging"]["next"] == f"{HOST}{JOBS}?q=%EF%BF%BD&pageSize=1&page=2"
    # C1: an unknown parameter is ignored, bytes that are not UTF-8 too: it does not make
    # the search for U+FFFD beside it malformed.
    result = api.get(JOBS, key=employer.key, query_string="q=%EF%BF%BD&utm=%FF")
    assert result.status_code == 200 and result.json["paging"]["total"] == 2


def test_every_bad_parameter_is_named(api: Any, employer: Any) -> None:
    result = api.get(JOBS, key=employer.key, params={"pageSize": "0", "page": "x", "status": "y"})
    assert sorted(entries(result, 400, "invalid_query")) == [
        ("page", "invalid_type"),
        ("pageSize", "out_of_range"),
        ("status", "out_of_range"),
    ]


def test_the_largest_values_are_accepted(api: Any, employer: Any) -> None:
    create_job(api, employer)
    assert len(listing(api, employer, pageSize=100)["data"]) == 1
    assert listing(api, employer, page=2147483647)["data"] == []


def test_unknown_parameters_are_ignored(api: Any, employer: Any) -> None:
    create_job(api, employer)
    body = listing(api, employer, order="title", foo="bar", PAGESIZE="0", SORT="title")
    assert body["paging"]["total"] == 1 and body["paging"]["pageSize"] == 10
    result = api.get(JOBS, key=employer.key, query_string="foo=%FF&%FF=1")
    assert result.status_code == 200 and result.json["paging"]["total"] == 1


def test_empty_values_mean_absent(api: Any, employer: Any) -> None:
    """C1/C6: an empty value means absent, and absent filters are not carried in links."""
    for _ in range(11):
        create_job(api, employer)
    result = api.get(f"{JOBS}?q=&status=&pageSize=&page=", key=employer.key)
    assert result.status_code == 200
    assert result.json["paging"]["page"] == 1 and result.json["paging"]["pageSize"] == 10
    assert result.json["paging"]["total"] == 11
    assert result.json["paging"]["next"] == f"{HOST}{JOBS}?pageSize=10&page=2"


def test_public_base_url_is_used_in_links_and_location(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, make_employer: Any
) -> None:
    """C6/C9: next and previous (and Location) use PUBLIC_BASE_URL when it is set."""
    public = dataclasses.replace(settings, public_base_url="https://jobs.example.test")
    api = Api(create_app(public, sessions, today=clock))
    account = make_employer()
    for _ in range(3):
        created = api.post(JOBS, json=job_body(), key=account.key)
        assert created.headers["location"] == (
            f"https://jobs.example.test{JOBS}/{created.json['id']}"
        )
    body = listing(api, account, pageSize=1, page=2, q="baker")
    assert (
        body["paging"]["previous"] == f"https://jobs.example.test{JOBS}?q=baker&pageSize=1&page=1"
    )
    assert body["paging"]["next"] == f"https://jobs.example.test{JOBS}?q=baker&pageSize=1&page=3"
    upserted = api.put(JOBS, json={**job_body(), "referenceId": "P-1"}, key=account.key)
    assert upserted.headers["location"].startswith("https://jobs.example.test/")


@pytest.mark.parametrize("q", [None, "multi"])
def test_headers_carry_every_location_in_order_and_pages_count_jobs(
    api: Any, employer: Any, q: str | None
) -> None:
    """C6: a page holds pageSize jobs however many locations each has, each header its job's
    locations in the order they were given (with and without a search)."""
    places = ["Vancouver, BC", "Halifax, NS", "Montreal, QC", "Toronto, ON"]
    made = []
    for i in range(5):
        chosen = [{"description": d} for d in (places[i % 4 :] + places[: i % 4])[: 1 + i % 3]]
        made.append(create_job(api, employer, title=f"Multi {i}", locations=chosen))
    params = {"q": q} if q else {}
    pages = [listing(api, employer, pageSize=2, page=p, **params) for p in (1, 2, 3)]
    assert [len(p["data"]) for p in pages] == [2, 2, 1]
    assert all(p["paging"]["total"] == 5 for p in pages)
    listed = {h["id"]: h["locations"] for p in pages for h in p["data"]}
    assert listed == {j["id"]: j["locations"] for j in made}
    assert [len(j["locations"]) for j in made] == [1, 2, 3, 1, 2]  # at most 3 (C4)


def test_totals_follow_every_change_while_a_process_keeps_search_totals(
    api: Any,
    employer: Any,
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
) -> None:
    """C6: `total` stays exact as jobs are created, renamed, moved between states, deleted and
    expired, though the process keeps the totals of searches between requests: each answer
    is the one a process keeping nothing gives, and the counts are the jobs'."""
    bakers = [create_job(api, employer, title=f"Baker {i}", status="active") for i in range(6)]
    clerks = [create_job(api, employer, title=f"Clerk {i}", status="draft") for i in range(6)]
    queries: list[dict[str, Any]] = [
        {}, {"status": "active"}, {"q": "baker"}, {"q": "baker", "status": "active"},
        {"q": "clerk", "pageSize": 2, "page": 2}, {"q": "e", "pageSize": 3},
    ]  # fmt: skip

    def answers(client: Any) -> list[dict[str, Any]]:
        return [listing(client, employer, **params) for params in queries]

    def totals() -> list[int]:
        seen = answers(api)
        assert seen == answers(Api(create_app(settings, sessions, today=clock)))
        return [body["paging"]["total"] for body in seen]

    assert totals() == [12, 6, 6, 6, 6, 12]
    assert totals() == [12, 6, 6, 6, 6, 12]  # served the kept totals
    create_job(api, employer, title="Baker 7", status="active")
    assert totals() == [13, 7, 7, 7, 6, 13]
    api.put(f"{JOBS}/{bakers[0]['id']}", json={"title": "Chef"}, key=employer.key)
    assert totals() == [13, 7, 6, 6, 6, 13]
    api.put(f"{JOBS}/{clerks[0]['id']}", json={"status": "active"}, key=employer.key)
    assert totals() == [13, 8, 6, 6, 6, 13]
    assert api.delete(f"{JOBS}/{bakers[1]['id']}", key=employer.key).status_code == 204
    assert totals() == [12, 7, 5, 5, 6, 12]
    with sessions() as s:  # the expiry task's UPDATE, past every closeDate
        assert upkeep.expire(s, today=clock.today + timedelta(days=61)) == 7
        s.commit()
    assert totals() == [12, 0, 5, 0, 6, 12]
