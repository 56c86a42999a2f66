"""C16 through the API, on both databases: `workplaceType` and `applicantLocations` in the
write and read shapes, each rule broken, PUT's partial semantics, the list (the change feed:
tests/api/test_change_feed.py), sync items, webhook payloads, and C13's rules for remote jobs
(the job page: tests/api/test_workplace_pages.py)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from models.core.settings import Settings
from models.db.entities import WebhookEndpoint, WebhookMessage
from models.jobs import upkeep
from tests.conftest import Account, Api
from tests.factories import JOBS, create_job, entries, job_body, read_shape
from workers import syncing

REMOTE = {"workplaceType": "remote"}


def written(api: Api, account: Account, **overrides: Any) -> dict[str, Any]:
    result = api.post(JOBS, json=job_body(**overrides), key=account.key)
    assert result.status_code == 201, result.text
    return read_shape(result.json)


def arrangement(job: dict[str, Any]) -> tuple[str, list[str]]:
    return job["workplaceType"], job["applicantLocations"]


# --- defaults and round trips ---------------------------------------------------------------


def test_a_job_is_on_site_by_default_and_a_remote_one_takes_all_of_canada(
    api: Api, employer: Account
) -> None:
    assert arrangement(create_job(api, employer)) == ("onSite", [])
    assert arrangement(create_job(api, employer, **REMOTE)) == ("remote", ["CA"])
    assert arrangement(create_job(api, employer, workplaceType="hybrid")) == ("hybrid", [])
    nulls = create_job(api, employer, workplaceType=None, applicantLocations=None)
    assert arrangement(nulls) == ("onSite", [])


def test_post_get_and_list_show_them_as_written(api: Api, employer: Account) -> None:
    job = create_job(api, employer, workplaceType="hybrid", applicantLocations=["QC", "ON"])
    assert arrangement(job) == ("hybrid", ["QC", "ON"])  # in the order written
    assert arrangement(api.get(f"{JOBS}/{job['id']}", key=employer.key).json) == arrangement(job)
    (header,) = api.get(JOBS, key=employer.key).json["data"]
    assert arrangement(header) == arrangement(job)


def test_a_get_result_sent_back_is_an_equal_job_and_no_write(api: Api, employer: Account) -> None:
    for changes in ({}, REMOTE, {**REMOTE, "applicantLocations": ["BC"]}):
        job = create_job(api, employer, **changes)
        again = {k: v for k, v in job.items() if k not in ("id", "referenceId")}
        copy = create_job(api, employer, **again)
        assert arrangement(copy) == arrangement(job)
        path = f"{JOBS}/{job['id']}"
        etag = api.get(path, key=employer.key).headers["etag"]
        result = api.put(path, json=job, key=employer.key)
        assert result.status_code == 200 and result.headers["etag"] == etag
        assert result.json["updatedAt"] == job["updatedAt"]  # unchanged: not written (C10)


def test_changing_them_changes_the_etag(api: Api, employer: Account) -> None:
    job = create_job(api, employer)
    path = f"{JOBS}/{job['id']}"
    before = api.get(path, key=employer.key).headers["etag"]
    changed = api.put(path, json=REMOTE, key=employer.key)
    assert changed.status_code == 200 and changed.headers["etag"] != before
    later = api.put(path, json={"applicantLocations": ["ON"]}, key=employer.key)
    assert later.headers["etag"] not in (before, changed.headers["etag"])


# --- PUT ------------------------------------------------------------------------------------


def test_put_without_them_keeps_them(api: Api, employer: Account) -> None:
    job = create_job(api, employer, **REMOTE, applicantLocations=["ON", "MB"])
    path = f"{JOBS}/{job['id']}"
    result = api.put(path, json={"title": "Remote baker"}, key=employer.key)
    assert arrangement(result.json) == ("remote", ["ON", "MB"])
    moved = api.put(path, json={"locations": [{"description": "Halifax, NS"}]}, key=employer.key)
    assert arrangement(moved.json) == ("remote", ["ON", "MB"])


def test_the_list_stays_across_hybrid_and_remote_and_goes_on_site(
    api: Api, employer: Account
) -> None:
    job = create_job(api, employer, **REMOTE)
    path = f"{JOBS}/{job['id']}"
    hybrid = api.put(path, json={"workplaceType": "hybrid"}, key=employer.key)
    assert arrangement(hybrid.json) == ("hybrid", ["CA"])  # the same list
    listed = api.put(path, json={"applicantLocations": ["QC"]}, key=employer.key)
    assert arrangement(listed.json) == ("hybrid", ["QC"])
    remote = api.put(path, json=REMOTE, key=employer.key)
    assert arrangement(remote.json) == ("remote", ["QC"])
    on_site = api.put(path, json={"workplaceType": "onSite"}, key=employer.key)
    assert arrangement(on_site.json) == ("onSite", [])  # dropped, as a route not taken
    back = api.put(path, json=REMOTE, key=employer.key)
    assert arrangement(back.json) == ("remote", ["CA"])  # the default again
    reset = api.put(path, json={"workplaceType": None}, key=employer.key)
    assert arrangement(reset.json) == ("onSite", [])


def test_an_empty_list_or_null_is_the_default(api: Api, employer: Account) -> None:
    job = create_job(api, employer, **REMOTE, applicantLocations=["ON"])
    path = f"{JOBS}/{job['id']}"
    defaults: tuple[list[str] | None, ...] = ([], None)
    for default in defaults:
        put = api.put(path, json={"applicantLocations": ["ON"]}, key=employer.key)
        assert arrangement(put.json) == ("remote", ["ON"])
        result = api.put(path, json={"applicantLocations": default}, key=employer.key)
        assert arrangement(result.json) == ("remote", ["CA"])


# --- rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"workplaceType": "Remote"}, [("workplaceType", "out_of_range")]),
        ({"workplaceType": "telecommute"}, [("workplaceType", "out_of_range")]),
        ({"workplaceType": 1}, [("workplaceType", "invalid_type")]),
        ({**REMOTE, "applicantLocations": "ON"}, [("applicantLocations", "invalid_type")]),
        ({**REMOTE, "applicantLocations": [9]}, [("applicantLocations[0]", "invalid_type")]),
        ({**REMOTE, "applicantLocations": ["on"]}, [("applicantLocations[0]", "out_of_range")]),
        (
            {**REMOTE, "applicantLocations": ["QC", "XX"]},
            [("applicantLocations[1]", "out_of_range")],
        ),
        ({**REMOTE, "applicantLocations": ["ON", "ON"]}, [("applicantLocations[1]", "duplicate")]),
        ({**REMOTE, "applicantLocations": ["CA", "ON"]}, [("applicantLocations[1]", "duplicate")]),
        ({**REMOTE, "applicantLocations": ["ON", "CA"]}, [("applicantLocations[1]", "duplicate")]),
        ({**REMOTE, "applicantLocations": ["ON"] * 15}, [("applicantLocations", "too_many")]),
        ({"applicantLocations": ["ON"]}, [("applicantLocations", "not_applicable")]),
        (
            {"workplaceType": "onSite", "applicantLocations": ["CA"]},
            [("applicantLocations", "not_applicable")],
        ),
        # The type is unknown: the list is not judged by it.
        (
            {"workplaceType": "away", "applicantLocations": ["ON"]},
            [("workplaceType", "out_of_range")],
        ),
    ],
)
def test_each_rule_broken_is_a_422_naming_the_field(
    api: Api, employer: Account, body: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert entries(api.post(JOBS, json=job_body(**body), key=employer.key)) == expected
    job = create_job(api, employer, workplaceType="hybrid")
    if "workplaceType" in body or expected[0][1] != "not_applicable":  # hybrid takes a list
        assert entries(api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key)) == expected


def test_a_list_sent_to_a_stored_on_site_job_is_refused(api: Api, employer: Account) -> None:
    job = create_job(api, employer)
    result = api.put(f"{JOBS}/{job['id']}", json={"applicantLocations": ["ON"]}, key=employer.key)
    assert entries(result) == [("applicantLocations", "not_applicable")]
    fine = api.put(f"{JOBS}/{job['id']}", json={"applicantLocations": []}, key=employer.key)
    assert fine.status_code == 200


# --- sync items and webhooks ----------------------------------------------------------------


def test_a_sync_item_writes_them_and_its_resend_is_unchanged_until_they_change(
    api: Api, employer: Account, sessions: sessionmaker[Session], settings: Settings
) -> None:
    def run(item: dict[str, Any]) -> str:
        body = {"mode": "upsert", "jobs": [{**job_body(**item), "referenceId": "W-1"}]}
        started = api.post("/api/v1.1/syncs", json=body, key=employer.key)
        assert started.status_code == 202, started.text
        run_id = started.json["id"]
        syncing.process(sessions, run_id, lease_seconds=300, timezone=settings.timezone)
        items = api.get(f"/api/v1.1/syncs/{run_id}/items", key=employer.key).json["data"]
        return str(items[0]["outcome"])

    remote = {**REMOTE, "applicantLocations": ["ON", "QC"]}
    assert run(remote) == "created"
    (job,) = api.get(JOBS, key=employer.key).json["data"]
    assert arrangement(job) == ("remote", ["ON", "QC"])
    assert run(remote) == "unchanged"
    assert run({**remote, "applicantLocations": ["ON"]}) == "updated"
    assert run({"workplaceType": "hybrid", "applicantLocations": ["ON"]}) == "updated"
    got = api.get(f"{JOBS}/{job['id']}", key=employer.key).json
    assert arrangement(got) == ("hybrid", ["ON"])


def test_a_webhook_job_payload_carries_them(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    now = datetime(2026, 3, 10, 12, tzinfo=UTC)
    with sessions() as s:
        s.add(
            WebhookEndpoint(
                employer_id=employer.id,
                url="https://hooks.example/x",
                events='["*"]',
                status="enabled",
                secret="sealed",
                created_at=now,
                updated_at=now,
            )
        )
        s.commit()
    job = create_job(
        api, employer, status="active", closeDate="2026-03-10", **REMOTE, applicantLocations=["NS"]
    )
    with sessions() as s:
        assert upkeep.expire(s, today=date(2026, 3, 11)) == 1
        s.commit()
        (payload,) = s.scalars(
            select(WebhookMessage.payload).where(WebhookMessage.type == "job.expired")
        )
    data = json.loads(payload)["data"]
    assert data["id"] == job["id"] and arrangement(data) == ("remote", ["NS"])


# --- C13 for remote jobs --------------------------------------------------------------------


def codes(result: Any) -> list[tuple[str, str]]:
    assert result.status_code == 201, result.text
    return [(w["field"], w["code"]) for w in result.json["warnings"]]


def test_a_remote_job_taking_applicants_from_ontario_follows_ontarios_rules(
    api: Api, employer: Account
) -> None:
    vancouver = [{"description": "Vancouver, BC"}]
    body = job_body(status="active", locations=vancouver, aiScreening=None, **REMOTE)
    from_ontario = api.post(JOBS, json={**body, "applicantLocations": ["ON"]}, key=employer.key)
    assert codes(from_ontario) == [("aiScreening", "ai_disclosure_required")]
    on_site = api.post(JOBS, json={**body, "workplaceType": "onSite"}, key=employer.key)
    assert codes(on_site) == []  # in Vancouver: BC asks for pay, which it states


def test_a_remote_job_follows_its_applicants_provinces_not_its_locations(
    api: Api, employer: Account
) -> None:
    body = job_body(status="active", aiScreening=None, **REMOTE)  # in Toronto
    from_bc = api.post(JOBS, json={**body, "applicantLocations": ["BC"]}, key=employer.key)
    assert codes(from_bc) == []
    everywhere = api.post(JOBS, json={**body, "aiScreening": False}, key=employer.key)
    assert codes(everywhere) == [("translation", "french_version_required")]  # CA: Quebec too


def test_a_hybrid_job_follows_its_locations_and_its_applicants_provinces(
    api: Api, employer: Account
) -> None:
    body = job_body(status="active", workplaceType="hybrid", applicantLocations=["QC"])
    assert codes(api.post(JOBS, json=body, key=employer.key)) == [
        ("translation", "french_version_required")
    ]
