"""C4 upsert and referenceId: PUT /jobs creates or updates by referenceId, POST refuses a used
one (409), a rename by id to a used one is 409, PUT by an unknown id is 404, DELETE by
referenceId frees it."""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from models.jobs import upkeep
from tests.factories import JOBS, create_job, entries, job_body, problem, read_shape, unstamped


def test_put_without_reference_id_is_422(api: Any, employer: Any) -> None:
    """C4: PUT /api/v1.1/jobs (no id): referenceId required."""
    assert entries(api.put(JOBS, json=job_body(), key=employer.key)) == [
        ("referenceId", "required")
    ]


def test_put_with_an_empty_reference_id_is_422(api: Any, employer: Any) -> None:
    for ref in ("", None):
        result = api.put(JOBS, json=job_body(referenceId=ref), key=employer.key)
        assert entries(result) == [("referenceId", "required")]


def test_put_without_reference_id_also_lists_the_other_broken_rules(
    api: Any, employer: Any
) -> None:
    result = api.put(JOBS, json=job_body(title="", referenceId="x" * 51), key=employer.key)
    assert entries(result) == [("referenceId", "too_long"), ("title", "too_short")]


def test_put_with_an_unknown_reference_id_creates_the_job(api: Any, employer: Any) -> None:
    """C4: unknown referenceId: create, 201 with an absolute Location header."""
    result = api.put(JOBS, json=job_body(referenceId="NEW-1"), key=employer.key)
    assert result.status_code == 201
    job = read_shape(result.json)
    assert job["referenceId"] == "NEW-1" and job["status"] == "draft"
    assert result.headers["location"] == f"http://127.0.0.1:8000{JOBS}/{job['id']}"
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_put_creating_lists_every_missing_required_property(api: Any, employer: Any) -> None:
    """C4: a create needs every required property (422 listing the missing ones)."""
    result = api.put(JOBS, json={"referenceId": "NEW-2", "title": "Baker"}, key=employer.key)
    assert entries(result) == [
        (name, "required")
        for name in (
            "locations",
            "categories",
            "positionType",
            "description",
            "applicantRoutingType",
        )
    ]


def test_repeating_the_same_put_yields_the_same_job_and_state(api: Any, employer: Any) -> None:
    """Interface rule 2 / C4: idempotent for a given referenceId."""
    body = job_body(referenceId="IDEM-1", status="active", closeDate="2026-04-01")
    first = api.put(JOBS, json=body, key=employer.key)
    second = api.put(JOBS, json=body, key=employer.key)
    third = api.put(JOBS, json=body, key=employer.key)
    assert (first.status_code, second.status_code, third.status_code) == (201, 200, 200)
    assert unstamped(first.json) == unstamped(second.json) == unstamped(third.json)
    assert "location" not in second.headers
    listed = api.get(JOBS, key=employer.key).json
    assert listed["paging"]["total"] == 1


def test_repeating_an_upsert_after_its_job_expired_answers_the_same_each_time(
    api: Any, employer: Any, sessions: sessionmaker[Session], clock: Any
) -> None:
    """C4 (the same PUT, the same job and state) with C5 expiry: an ATS re-sending its unchanged
    copy of a job the service expired. The first repeat made the job active again until today
    + 60 (a closed job taking applications), and the next one was 422 in_the_past."""
    body = job_body(referenceId="EXP-1", status="active", closeDate="2026-03-20")
    assert api.put(JOBS, json=body, key=employer.key).status_code == 201
    clock.today = date(2026, 3, 25)
    with sessions() as s:
        assert upkeep.expire(s, today=clock.today) == 1
        s.commit()
    answers = [api.put(JOBS, json=body, key=employer.key) for _ in range(2)]
    assert [entries(a) for a in answers] == [[("closeDate", "in_the_past")]] * 2
    assert api.get(JOBS, key=employer.key).json["data"][0]["status"] == "archived"


def test_put_with_a_known_reference_id_is_a_partial_update(api: Any, employer: Any) -> None:
    job = create_job(api, employer, referenceId="UPD-1")
    result = api.put(JOBS, json={"referenceId": "UPD-1", "title": "Renamed"}, key=employer.key)
    assert result.status_code == 200
    changed = {**job, "title": "Renamed", "updatedAt": result.json["updatedAt"]}
    assert read_shape(result.json) == changed
    assert result.json["updatedAt"] > job["updatedAt"]  # a change moves it (C10)


def test_reference_ids_are_compared_exactly(api: Any, employer: Any) -> None:
    """C2: referenceId is unique per employer and compared exactly (case-sensitive)."""
    lower = create_job(api, employer, referenceId="abc")
    upper = create_job(api, employer, referenceId="ABC")
    spaced = create_job(api, employer, referenceId=" abc")
    assert len({lower["id"], upper["id"], spaced["id"]}) == 3


def test_post_reusing_a_reference_id_is_409(api: Any, employer: Any) -> None:
    """C1/C4: POST with a referenceId this employer already uses; the first use succeeds."""
    create_job(api, employer, referenceId="DUP-1")
    result = api.post(JOBS, json=job_body(referenceId="DUP-1"), key=employer.key)
    problem(result, 409, "duplicate_reference_id")
    assert api.get(JOBS, key=employer.key).json["paging"]["total"] == 1


def test_put_by_id_renaming_to_a_used_reference_id_is_409(api: Any, employer: Any) -> None:
    create_job(api, employer, referenceId="USED")
    job = create_job(api, employer, referenceId="MINE")
    result = api.put(f"{JOBS}/{job['id']}", json={"referenceId": "USED"}, key=employer.key)
    problem(result, 409, "duplicate_reference_id")
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json["referenceId"] == "MINE"


def test_put_by_id_keeping_or_freeing_its_own_reference_id_is_fine(api: Any, employer: Any) -> None:
    job = create_job(api, employer, referenceId="MINE")
    same = api.put(f"{JOBS}/{job['id']}", json={"referenceId": "MINE"}, key=employer.key)
    assert same.status_code == 200
    renamed = api.put(f"{JOBS}/{job['id']}", json={"referenceId": "OTHER"}, key=employer.key)
    assert renamed.status_code == 200 and renamed.json["referenceId"] == "OTHER"
    assert create_job(api, employer, referenceId="MINE")["referenceId"] == "MINE"


def test_put_by_an_unknown_id_is_404_and_creates_nothing(api: Any, employer: Any) -> None:
    """C4: PUT by id never creates."""
    result = api.put(f"{JOBS}/424242", json=job_body(referenceId="GHOST"), key=employer.key)
    problem(result, 404, "not_found")
    assert api.get(JOBS, key=employer.key).json["paging"]["total"] == 0


def test_delete_by_reference_id_frees_it(api: Any, employer: Any) -> None:
    """C4: DELETE /jobs with {"referenceId": …}: 204; then the referenceId is free again."""
    job = create_job(api, employer, referenceId="GONE")
    result = api.delete(JOBS, json={"referenceId": "GONE"}, key=employer.key)
    assert result.status_code == 204 and result.content == b""
    problem(api.get(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")
    again = create_job(api, employer, referenceId="GONE")
    assert read_shape(api.put(JOBS, json={"referenceId": "GONE"}, key=employer.key).json) == again


def test_delete_by_an_unknown_reference_id_is_404(api: Any, employer: Any) -> None:
    result = api.delete(JOBS, json={"referenceId": "NOPE"}, key=employer.key)
    problem(result, 404, "not_found")


def test_delete_by_reference_id_without_one_is_422(api: Any, employer: Any) -> None:
    for body in ({}, {"referenceId": ""}, {"referenceId": None}):
        assert entries(api.delete(JOBS, json=body, key=employer.key)) == [
            ("referenceId", "required")
        ]
    assert entries(api.delete(JOBS, json={"referenceId": 5}, key=employer.key)) == [
        ("referenceId", "invalid_type")
    ]


def test_delete_by_id_is_204_and_the_job_is_gone(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    result = api.delete(f"{JOBS}/{job['id']}", key=employer.key)
    assert result.status_code == 204 and result.content == b""
    problem(api.get(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")
    problem(api.delete(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")
