"""C3 reference lists: fixed ids and names, the locations list with q and paging (C6), one
location by id, no key needed, and HTTP caching (Cache-Control, ETag, 304)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from models.reference.lists import fold
from tests.factories import problem
from tests.services import missing

V = "/api/v1.1"
HOST = "http://127.0.0.1:8000"
POSITION_TYPES = ["Full Time", "Part Time", "Contract", "Temp", "Volunteer"]
CATEGORIES = [
    "Accounting & Finance",
    "Administrative & Office",
    "Agriculture & Fishing",
    "Arts, Media & Design",
    "Banking & Insurance",
    "Construction & Trades",
    "Customer Service",
    "Education & Training",
    "Engineering",
    "Government & Public Sector",
    "Healthcare",
    "Hospitality & Tourism",
    "Human Resources",
    "Information Technology",
    "Legal",
    "Management & Executive",
    "Manufacturing & Production",
    "Marketing & Communications",
    "Mining, Oil & Gas",
    "Non-Profit & Social Services",
    "Real Estate & Property",
    "Retail",
    "Sales",
    "Science & Research",
    "Security & Law Enforcement",
    "Skilled Labour",
    "Sports & Recreation",
    "Telecommunications",
    "Transportation & Logistics",
    "Utilities & Energy",
]
PROVINCES = [
    "Alberta",
    "British Columbia",
    "Manitoba",
    "New Brunswick",
    "Newfoundland and Labrador",
    "Nova Scotia",
    "Northwest Territories",
    "Nunavut",
    "Ontario",
    "Prince Edward Island",
    "Quebec",
    "Saskatchewan",
    "Yukon",
]


def test_position_types_are_the_five_fixed_ones(api: Any) -> None:
    """C3: 1 Full Time, 2 Part Time, 3 Contract, 4 Temp, 5 Volunteer."""
    result = api.get(f"{V}/positiontypes")
    assert result.status_code == 200
    assert result.json == {"data": [{"id": i, "name": n} for i, n in enumerate(POSITION_TYPES, 1)]}


def test_categories_are_the_thirty_fixed_ones(api: Any) -> None:
    result = api.get(f"{V}/categories")
    assert result.json == {"data": [{"id": i, "name": n} for i, n in enumerate(CATEGORIES, 1)]}
    assert all(len(n) <= 40 for n in CATEGORIES)


@pytest.mark.parametrize(
    "path",
    [
        "/positiontypes",
        "/categories",
        "/locations",
        "/locations/6167865",
        "/locations?q=tor&page=2",
    ],
)
def test_reference_lists_are_public_and_cacheable(api: Any, path: str) -> None:
    """C3: no API key, Cache-Control public max-age 3600, an ETag; If-None-Match gives 304."""
    first = api.get(f"{V}{path}")
    assert first.status_code == 200
    assert first.headers["cache-control"] == "public, max-age=3600"
    etag = first.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')
    again = api.get(f"{V}{path}", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    weak = api.get(f"{V}{path}", headers={"If-None-Match": f'"other", W/{etag}'})
    assert weak.status_code == 304
    stale = api.get(f"{V}{path}", headers={"If-None-Match": '"stale"'})
    assert stale.status_code == 200 and stale.json == first.json


def test_reference_lists_ignore_a_bad_key(api: Any) -> None:
    assert api.get(f"{V}/categories", key="not-a-key").status_code == 200


def test_locations_without_q_start_with_the_provinces_and_are_ordered_by_name(api: Any) -> None:
    """C3: without q, ordered by name; provinces have ids 1 to 13 and no coordinates."""
    body = api.get(f"{V}/locations", params={"pageSize": 100}).json
    names = [loc["name"] for loc in body["data"]]
    assert names == sorted(names, key=lambda name: (fold(name), name))
    assert body["paging"]["total"] > 100
    provinces = [
        loc
        for p in range(1, body["paging"]["pages"] + 1)
        for loc in api.get(f"{V}/locations", params={"pageSize": 100, "page": p}).json["data"]
        if loc["id"] <= 13
    ]
    assert sorted(p["name"] for p in provinces) == sorted(PROVINCES)
    ontario = next(p for p in provinces if p["id"] == 9)
    assert ontario == {
        "id": 9,
        "name": "Ontario",
        "description": "Ontario",
        "type": "Province",
        "latitude": None,
        "longitude": None,
    }
    assert next(p for p in provinces if p["id"] == 13)["type"] == "Territory"


def test_locations_are_in_the_same_alphabetical_order_whatever_the_database_collation(
    api: Any, engine: Engine, sessions: sessionmaker[Session]
) -> None:
    """C3 "without q, by name", the same on SQLite and PostgreSQL: accents and case aside
    (Québec beside Quebec, not after Quispamsis as in code point order), and whatever the
    collation PostgreSQL gives `name` (the database's locale: en_US in the postgres image)."""
    if engine.dialect.name == "postgresql":
        with sessions() as s:  # rolled back with the test
            if not s.scalar(text("SELECT 1 FROM pg_collation WHERE collname = 'en-US-x-icu'")):
                missing("PostgreSQL's ICU collation en-US-x-icu")
            for column, size in (("name", 256), ("name_key", 256)):
                s.execute(
                    text(
                        f"ALTER TABLE locations ALTER COLUMN {column} "
                        f'TYPE varchar({size}) COLLATE "en-US-x-icu"'
                    )
                )
            s.commit()
    first = api.get(f"{V}/locations", params={"pageSize": 100}).json
    listed = [
        loc["name"]
        for page in range(1, first["paging"]["pages"] + 1)
        for loc in api.get(f"{V}/locations", params={"pageSize": 100, "page": page}).json["data"]
    ]
    assert listed == sorted(listed, key=lambda name: (fold(name), name))
    assert listed.index("Quebec") + 1 == listed.index("Québec")


def test_locations_q_matches_any_part_shortest_names_first(api: Any) -> None:
    """C3: q matches any part of a name; shortest names first."""
    body = api.get(f"{V}/locations", params={"q": "VAN", "pageSize": 100}).json
    names = [loc["name"] for loc in body["data"]]
    assert "Vancouver" in names and "North Vancouver" in names
    assert all("van" in n.lower() for n in names)
    assert [len(n) for n in names] == sorted(len(n) for n in names)
    assert names.index("Vancouver") < names.index("North Vancouver")


def test_locations_q_is_accent_insensitive(api: Any) -> None:
    names = [
        loc["name"] for loc in api.get(f"{V}/locations", params={"q": "montreal"}).json["data"]
    ]
    assert "Montréal" in names


def test_locations_are_paged_like_jobs(api: Any) -> None:
    """C3/C6: every paged list follows the C6 rules, q carried in the links."""
    body = api.get(f"{V}/locations", params={"q": "on", "pageSize": 2, "page": 2}).json
    assert len(body["data"]) == 2
    assert body["paging"]["previous"] == f"{HOST}{V}/locations?q=on&pageSize=2&page=1"
    assert body["paging"]["next"] == f"{HOST}{V}/locations?q=on&pageSize=2&page=3"
    past = api.get(f"{V}/locations", params={"q": "zzzz", "page": 3}).json
    assert past["data"] == [] and past["paging"]["pages"] == 0
    assert past["paging"]["previous"] == f"{HOST}{V}/locations?q=zzzz&pageSize=10&page=2"


@pytest.mark.parametrize(
    "params",
    [{"pageSize": "0"}, {"pageSize": "101"}, {"page": "abc"}, {"q": "\x00"}, {"q": "a\x1fb"}],
)
def test_locations_reject_a_bad_query_parameter(api: Any, params: dict[str, str]) -> None:
    result = api.get(f"{V}/locations", params=params)
    body = problem(result, 400, "invalid_query")
    assert [e["field"] for e in body["errors"]] == list(params)


@pytest.mark.parametrize(
    ("query", "name"), [("q=%FF", "q"), ("q=%C0%80", "q"), ("page=%FF", "page")]
)
def test_locations_reject_a_parameter_that_is_not_utf_8(api: Any, query: str, name: str) -> None:
    # C1/C6: not a search for U+FFFD, echoed as q=%EF%BF%BD in the links.
    body = problem(api.get(f"{V}/locations", query_string=query), 400, "invalid_query")
    assert [(e["field"], e["code"]) for e in body["errors"]] == [(name, "invalid_format")]


def test_one_location_by_id(api: Any) -> None:
    result = api.get(f"{V}/locations/6167865")
    assert result.json == {
        "id": 6167865,
        "name": "Toronto",
        "description": "Toronto, ON",
        "type": "City",
        "latitude": 43.70643,
        "longitude": -79.39864,
    }
    assert api.get(f"{V}/locations/1").json["name"] == "Alberta"


@pytest.mark.parametrize("raw", ["0", "999", "2147483647", "2147483648", "abc", "-1", "1.0"])
def test_an_unknown_or_malformed_location_id_is_404(api: Any, raw: str) -> None:
    problem(api.get(f"{V}/locations/{raw}"), 404, "not_found")
