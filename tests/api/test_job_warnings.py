"""C10 warnings: every successful job write answers `warnings` (empty when nothing), in
order by field then code; reads never do; the ETag stays that of the read shape."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.jobs.warnings import Warning, ordered
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, job_body, read_shape


def codes(result: Any) -> list[tuple[str, str]]:
    assert result.status_code in (200, 201), result.text
    return [(w["field"], w["code"]) for w in result.json["warnings"]]


def test_a_write_with_nothing_to_say_answers_an_empty_list_and_reads_have_none(
    api: Api, employer: Account
) -> None:
    created = api.post(JOBS, json=job_body(status="active"), key=employer.key)
    assert created.json["warnings"] == []
    path = f"{JOBS}/{created.json['id']}"
    assert api.put(path, json={"title": "Other"}, key=employer.key).json["warnings"] == []
    upsert = api.put(JOBS, json=job_body(referenceId="W-0"), key=employer.key)
    assert upsert.status_code == 201 and upsert.json["warnings"] == []
    read = api.get(path, key=employer.key)
    assert "warnings" not in read.json
    assert all("warnings" not in job for job in api.get(JOBS, key=employer.key).json["data"])


def test_the_etag_of_a_write_is_that_of_the_read_shape(api: Api, employer: Account) -> None:
    """The answer carries `warnings`; its ETag is the GET's all the same (C10), and the
    answer without `warnings` is the GET's body."""
    created = api.post(
        JOBS, json=job_body(locations=[{"description": "Richmond"}]), key=employer.key
    )
    assert created.json["warnings"]
    path = f"{JOBS}/{created.json['id']}"
    first = api.get(path, key=employer.key)  # read, then kept by the process
    assert first.headers["etag"] == created.headers["etag"]
    assert first.json == read_shape(created.json)
    again = api.put(path, json={"locations": [{"description": "Richmond"}]}, key=employer.key)
    assert again.json["warnings"] and again.headers["etag"] == first.headers["etag"]
    kept = api.get(path, key=employer.key, headers={"If-None-Match": again.headers["etag"]})
    assert kept.status_code == 304


def test_location_ambiguous_names_the_chosen_place_and_up_to_3_others(
    api: Api, employer: Account
) -> None:
    body = job_body(locations=[{"description": "Toronto, ON"}, {"description": "richmond"}])
    result = api.post(JOBS, json=body, key=employer.key)
    assert codes(result) == [("locations[1].description", "location_ambiguous")]
    message = result.json["warnings"][0]["message"]
    assert "Richmond, BC was chosen" in message, message
    others = message.split("write ", 1)[1].rstrip(".").split(" or ")
    assert len(others) == 3 and "Richmond, BC" not in others, message
    assert result.json["locations"][1]["description"] == "Richmond, BC"
    for other in others:  # each names its place, as written
        written = api.post(
            JOBS + "?dryRun=true",
            json=job_body(locations=[{"description": other}]),
            key=employer.key,
        )
        assert written.json["locations"][0]["description"] == other
        assert ("locations[0].description", "location_ambiguous") not in codes(written)


def test_location_ambiguous_shows_an_id_where_places_share_a_description(
    api: Api, employer: Account
) -> None:
    """Two Vanier, ON: the other is written with its id (C3)."""
    result = api.post(
        JOBS, json=job_body(locations=[{"description": "Vanier, ON"}]), key=employer.key
    )
    assert codes(result) == [("locations[0].description", "location_ambiguous")]
    assert '{"id": 13580764, "description": "Vanier, ON"}' in result.json["warnings"][0]["message"]


@pytest.mark.parametrize(
    "location",
    [
        {"description": "Toronto, ON"},
        {"description": "Richmond, BC"},
        {"id": 6122085, "description": "Richmond"},  # an id says which: nothing to warn
        {"id": 13580764, "description": "Vanier, ON"},
        {"id": 6122085},
    ],
)
def test_no_location_ambiguous_when_the_writing_names_one_place(
    api: Api, employer: Account, location: dict[str, Any]
) -> None:
    result = api.post(JOBS, json=job_body(locations=[location]), key=employer.key)
    assert codes(result) == []


def test_location_added_only_on_the_write_that_adds_the_place(api: Api, employer: Account) -> None:
    place = {"description": "Vanderhoof, BC"}
    first = api.post(JOBS, json=job_body(locations=[place]), key=employer.key)
    assert codes(first) == [("locations[0].description", "location_added")]
    assert "Vanderhoof, BC" in first.json["warnings"][0]["message"]
    assert "was added" in first.json["warnings"][0]["message"]
    second = api.post(JOBS, json=job_body(locations=[place]), key=employer.key)
    assert codes(second) == []
    job = create_job(api, employer)
    moved = {"locations": [{"description": "Toronto, ON"}, {"description": "Fort St. James, BC"}]}
    result = api.put(f"{JOBS}/{job['id']}", json=moved, key=employer.key)
    assert codes(result) == [("locations[1].description", "location_added")]


def test_auto_refresh_inactive_when_the_plan_is_not_unlimited(
    api: Api, make_employer: Any, sessions: sessionmaker[Session]
) -> None:
    """A true left over from a plan downgrade is kept (C4), and said to do nothing."""
    account = make_employer("Refresh Co", plan="unlimited")
    created = api.post(JOBS, json=job_body(autoRefresh=True), key=account.key)
    assert codes(created) == []
    with sessions() as s:
        employers.set_plan(s, account.id, "standard")
        s.commit()
    path = f"{JOBS}/{created.json['id']}"
    result = api.put(path, json={"title": "Still refreshing?"}, key=account.key)
    assert codes(result) == [("autoRefresh", "auto_refresh_inactive")]
    off = api.put(path, json={"autoRefresh": False}, key=account.key)
    assert codes(off) == []


@pytest.mark.parametrize(
    ("status", "days", "expected"),
    [
        ("active", 0, [("closeDate", "closes_soon")]),
        ("active", 3, [("closeDate", "closes_soon")]),
        ("active", 4, []),
        ("draft", 1, []),
        ("archived", 0, []),
    ],
)
def test_closes_soon_on_an_active_job_closing_within_3_days(
    api: Api, employer: Account, clock: Clock, status: str, days: int, expected: list[Any]
) -> None:
    close = (clock.today + timedelta(days=days)).isoformat()
    result = api.post(JOBS, json=job_body(status=status, closeDate=close), key=employer.key)
    assert codes(result) == expected
    if expected:
        assert close in result.json["warnings"][0]["message"]


@pytest.mark.parametrize(("status", "warned"), [("active", True), ("draft", False)])
def test_already_closed_on_an_active_job_past_its_close_date(
    api: Api, employer: Account, clock: Clock, status: str, warned: bool
) -> None:
    """Expiry has not run yet: the job is still active after its closeDate (C5)."""
    close = (clock.today + timedelta(days=1)).isoformat()
    job = create_job(api, employer, status=status, closeDate=close, referenceId="OLD")
    clock.today += timedelta(days=5)
    result = api.put(JOBS, json={"referenceId": "OLD", "title": "Late"}, key=employer.key)
    assert codes(result) == ([("closeDate", "already_closed")] if warned else [])
    assert result.json["id"] == job["id"]


def test_warnings_are_ordered_by_field_then_code(
    api: Api, make_employer: Any, sessions: sessionmaker[Session], clock: Clock
) -> None:
    account = make_employer("Order Co", plan="unlimited")
    body = job_body(
        status="active",
        autoRefresh=True,
        closeDate=(clock.today + timedelta(days=2)).isoformat(),
        locations=[
            {"description": "Kingston"},
            {"description": "Vanderhoof, BC"},
            {"description": "Richmond"},
        ],
    )
    created = api.post(JOBS, json=body, key=account.key)
    assert codes(created) == [
        ("closeDate", "closes_soon"),
        ("locations[0].description", "location_ambiguous"),
        ("locations[1].description", "location_added"),
        ("locations[2].description", "location_ambiguous"),
    ]
    with sessions() as s:
        employers.set_plan(s, account.id, "standard")
        s.commit()
    again = api.put(f"{JOBS}/{created.json['id']}", json=body, key=account.key)
    assert codes(again) == [
        ("autoRefresh", "auto_refresh_inactive"),
        ("closeDate", "closes_soon"),
        ("locations[0].description", "location_ambiguous"),
        ("locations[2].description", "location_ambiguous"),
    ]


def test_the_order_compares_fields_then_codes_as_strings() -> None:
    """Two codes on one field, and fields that sort as strings (`locations[10]` before
    `locations[2]`), which no job write of three locations can show."""
    found = [
        Warning("locations[2].description", "location_ambiguous", ""),
        Warning("locations[10].description", "location_ambiguous", ""),
        Warning("locations[2].description", "location_added", ""),
        Warning("closeDate", "closes_soon", ""),
    ]
    assert [(w.field, w.code) for w in ordered(found)] == [
        ("closeDate", "closes_soon"),
        ("locations[10].description", "location_ambiguous"),
        ("locations[2].description", "location_added"),
        ("locations[2].description", "location_ambiguous"),
    ]
