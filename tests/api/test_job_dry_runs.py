"""C10 dry runs: `?dryRun=true` on POST /jobs, PUT /jobs/{id} and PUT /jobs answers exactly
what the real request would (its errors, or 200 with the job as it would be stored and its
warnings) and stores nothing: no row, no version, no tally, no listed place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from models.db.entities import IdempotencyKey, Job, JobCategory, JobLocation, JobTally, Location
from tests.conftest import Account, Api
from tests.factories import JOBS, create_job, entries, job_body, problem, read_shape, unstamped

DRY = "?dryRun=true"
SMALL_PLACE = {"description": "Vanderhoof, BC"}  # in the gazetteer, not in the list (C3)


def stored(sessions: sessionmaker[Session], employer_id: int) -> dict[str, Any]:
    """Everything a job write may store for the employer: its jobs' rows (versions and
    updatedAt included), their locations and categories, its tallies, the locations list,
    and the idempotency keys."""
    with sessions() as s:
        jobs = s.execute(
            select(*Job.__table__.c).where(Job.employer_id == employer_id).order_by(Job.id)
        ).all()
        ids = [row.id for row in jobs]
        items = [
            s.execute(
                select(*t.__table__.c).where(t.job_id.in_(ids)).order_by(*t.__table__.c)
            ).all()
            for t in (JobLocation, JobCategory)
        ]
        tallies = s.execute(
            select(*JobTally.__table__.c)
            .where(JobTally.employer_id == employer_id)
            .order_by(JobTally.id)
        ).all()
        listed = s.scalars(select(Location.id).where(Location.listed.is_(True))).all()
        keys = s.scalar(select(func.count()).select_from(IdempotencyKey))
    return {"jobs": jobs, "items": items, "tallies": tallies, "listed": set(listed), "keys": keys}


def test_a_dry_run_post_answers_the_job_it_would_create_and_stores_nothing(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    body = job_body(referenceId="DRY-1", status="active", locations=[SMALL_PLACE])
    before = stored(sessions, employer.id)
    dry = api.post(JOBS + DRY, json=body, key=employer.key)
    assert dry.status_code == 200, dry.text
    assert "location" not in dry.headers and "etag" not in dry.headers
    assert dry.json["id"] is None
    assert [(w["field"], w["code"]) for w in dry.json["warnings"]] == [
        ("locations[0].description", "location_added")
    ]
    assert "would be added" in dry.json["warnings"][0]["message"]
    assert stored(sessions, employer.id) == before
    assert api.get("/api/v1.1/locations", params={"q": "Vanderhoof"}).json["data"] == []
    real = api.post(JOBS, json=body, key=employer.key)
    assert real.status_code == 201
    # A dry run has no change time: updatedAt is null for a job it would create (C10).
    assert dry.json["updatedAt"] is None
    assert {**unstamped(read_shape(dry.json)), "id": real.json["id"]} == unstamped(
        read_shape(real.json)
    )
    codes = [(w["field"], w["code"]) for w in real.json["warnings"]]
    assert codes == [(w["field"], w["code"]) for w in dry.json["warnings"]]
    assert "was added" in real.json["warnings"][0]["message"]


def test_a_dry_run_put_by_reference_id_creates_or_updates_nothing(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    before = stored(sessions, employer.id)
    new = api.put(JOBS + DRY, json=job_body(referenceId="DRY-2"), key=employer.key)
    assert new.status_code == 200 and new.json["id"] is None and new.json["warnings"] == []
    assert "location" not in new.headers and "etag" not in new.headers
    assert stored(sessions, employer.id) == before
    job = create_job(api, employer, referenceId="DRY-3")
    etag = api.get(f"{JOBS}/{job['id']}", key=employer.key).headers["etag"]
    before = stored(sessions, employer.id)
    change = {"referenceId": "DRY-3", "title": "Night Baker"}
    dry = api.put(JOBS + DRY, json=change, key=employer.key)
    assert dry.status_code == 200 and read_shape(dry.json) == {**job, "title": "Night Baker"}
    assert stored(sessions, employer.id) == before
    read = api.get(f"{JOBS}/{job['id']}", key=employer.key)
    assert read.json == job and read.headers["etag"] == etag


def test_a_dry_run_put_by_id_changes_nothing(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, status="draft")
    path = f"{JOBS}/{job['id']}"
    before = stored(sessions, employer.id)
    change = {"status": "active", "locations": [SMALL_PLACE], "closeDate": "2026-03-11"}
    dry = api.put(path + DRY, json=change, key=employer.key)
    assert dry.status_code == 200 and "etag" not in dry.headers
    assert dry.json["id"] == job["id"] and dry.json["status"] == "active"
    assert [(w["field"], w["code"]) for w in dry.json["warnings"]] == [
        ("closeDate", "closes_soon"),
        ("locations[0].description", "location_added"),
    ]
    assert stored(sessions, employer.id) == before
    assert api.get(path, key=employer.key).json == job
    real = api.put(path, json=change, key=employer.key)
    assert dry.json["updatedAt"] == job["updatedAt"]  # no change yet: the stored time (C10)
    assert unstamped(read_shape(real.json)) == unstamped(read_shape(dry.json))


def test_a_dry_run_through_a_method_override_is_a_dry_run(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    """C7: the overridden POST is the PUT it names, its query included."""
    job = create_job(api, employer)
    before = stored(sessions, employer.id)
    dry = api.post(
        f"{JOBS}/{job['id']}{DRY}",
        json={"title": "Overridden"},
        key=employer.key,
        headers={"X-HTTP-Method-Override": "PUT"},
    )
    assert dry.status_code == 200 and dry.json["title"] == "Overridden"
    assert stored(sessions, employer.id) == before


# --- the same errors as the real request --------------------------------------------------

Request = Callable[[Api, Account, dict[str, Any], str], Any]


def _post(body: dict[str, Any]) -> Request:
    return lambda api, account, job, query: api.post(JOBS + query, json=body, key=account.key)


def _put_id(body: Any, headers: dict[str, str] | None = None, job_id: int | None = None) -> Request:
    def send(api: Api, account: Account, job: dict[str, Any], query: str) -> Any:
        path = f"{JOBS}/{job_id if job_id is not None else job['id']}{query}"
        sent = {k: v.replace("ETAG", job["etag"]) for k, v in (headers or {}).items()}
        if isinstance(body, bytes):
            sent.setdefault("Content-Type", "application/json")
            return api.put(path, body=body, headers=sent, key=account.key)
        return api.put(path, json=body, headers=sent, key=account.key)

    return send


def _put_reference(body: dict[str, Any], headers: dict[str, str] | None = None) -> Request:
    def send(api: Api, account: Account, job: dict[str, Any], query: str) -> Any:
        return api.put(JOBS + query, json=body, headers=headers or {}, key=account.key)

    return send


CASES: list[tuple[str, Request, int, str]] = [
    ("post-422", _post(job_body(title="", categories=[])), 422, "validation_failed"),
    ("post-409", _post(job_body(referenceId="TAKEN")), 409, "duplicate_reference_id"),
    (
        "post-409-before-422",
        _post(job_body(referenceId="TAKEN", title="")),
        409,
        "duplicate_reference_id",
    ),
    ("put-id-404", _put_id({"title": "X"}, job_id=999_999), 404, "not_found"),
    ("put-id-409", _put_id({"referenceId": "TAKEN"}), 409, "duplicate_reference_id"),
    ("put-id-412", _put_id({"title": "X"}, {"If-Match": '"nope"'}), 412, "precondition_failed"),
    (
        "put-id-412-before-422",
        _put_id({"title": ""}, {"If-Match": '"nope"'}),
        412,
        "precondition_failed",
    ),
    ("put-id-422", _put_id({"title": "", "salary": {"amount": -1}}), 422, "validation_failed"),
    ("put-id-400", _put_id(b"{not json"), 400, "malformed_json"),
    (
        "put-ref-412-create-only",
        _put_reference({"referenceId": "MINE"}, {"If-None-Match": "*"}),
        412,
        "precondition_failed",
    ),
    (
        "put-ref-412-no-job",
        _put_reference(job_body(referenceId="NEW"), {"If-Match": "*"}),
        412,
        "precondition_failed",
    ),
    ("put-ref-422-no-reference", _put_reference(job_body()), 422, "validation_failed"),
    (
        "put-ref-422-create-missing",
        _put_reference({"referenceId": "NEW", "title": "Only"}),
        422,
        "validation_failed",
    ),
    ("put-ref-422-update", _put_reference({"referenceId": "MINE", "status": "x"}), 422, ""),
]


@pytest.mark.parametrize(
    ("request_", "status", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_dry_run_answers_the_real_requests_error_and_stores_nothing(
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    request_: Request,
    status: int,
    code: str,
) -> None:
    create_job(api, employer, referenceId="TAKEN")
    mine = create_job(api, employer, referenceId="MINE")
    job = {**mine, "etag": api.get(f"{JOBS}/{mine['id']}", key=employer.key).headers["etag"]}
    before = stored(sessions, employer.id)
    dry = request_(api, employer, job, DRY)
    problem(dry, status, code or "validation_failed")
    assert stored(sessions, employer.id) == before
    real = request_(api, employer, job, "")
    assert (real.status_code, real.json) == (dry.status_code, dry.json)
    assert real.headers.get("etag") == dry.headers.get("etag")  # a 412's current ETag too


# --- the parameter ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query", ["dryRun=yes", "dryRun=TRUE", "dryRun=1", "dryRun=true&dryRun=false", "dryRun=%00"]
)
def test_any_other_value_of_dry_run_is_400_invalid_query(
    api: Api, employer: Account, sessions: sessionmaker[Session], query: str
) -> None:
    job = create_job(api, employer, referenceId="Q-1")
    before = stored(sessions, employer.id)
    for result in (
        api.post(f"{JOBS}?{query}", json=job_body(), key=employer.key),
        api.put(f"{JOBS}?{query}", json={"referenceId": "Q-1", "title": "X"}, key=employer.key),
        api.put(f"{JOBS}/{job['id']}?{query}", json={"title": "X"}, key=employer.key),
    ):
        assert entries(result, 400, "invalid_query") == [("dryRun", "invalid_format")]
    assert stored(sessions, employer.id) == before


@pytest.mark.parametrize("query", ["", "?dryRun=false", "?dryRun="])
def test_dry_run_false_empty_or_absent_is_a_real_write(
    api: Api, employer: Account, query: str
) -> None:
    created = api.post(JOBS + query, json=job_body(), key=employer.key)
    assert created.status_code == 201 and created.json["id"] is not None
    path = f"{JOBS}/{created.json['id']}"
    updated = api.put(path + query, json={"title": "Real"}, key=employer.key)
    assert updated.status_code == 200
    assert api.get(path, key=employer.key).json["title"] == "Real"


def test_other_operations_ignore_dry_run(api: Api, employer: Account) -> None:
    """C10 lists the job writes (and sync runs); elsewhere dryRun is an unknown parameter,
    ignored (C1): a DELETE with it deletes."""
    job = create_job(api, employer)
    assert api.get(f"{JOBS}?dryRun=yes", key=employer.key).status_code == 200
    assert api.get(f"{JOBS}/{job['id']}?dryRun=true", key=employer.key).json == job
    assert api.delete(f"{JOBS}/{job['id']}?dryRun=true", key=employer.key).status_code == 204
    problem(api.get(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")


def test_a_dry_run_answers_the_members_it_would_change_from_and_to(
    api: Api, employer: Account
) -> None:
    """C10: `changes` lists each member of the read shape the write would change, in the
    shape's order, with its stored and its new value; arrays whole."""
    job = create_job(api, employer, referenceId="CH-1", status="draft")
    path = f"{JOBS}/{job['id']}"
    change = {"title": "Night Baker", "status": "active", "categories": [{"id": 1}]}
    dry = api.put(path + DRY, json=change, key=employer.key)
    assert dry.status_code == 200
    publish = dry.json["publishDate"]
    assert dry.json["changes"] == [
        {"field": "title", "from": "Senior Baker", "to": "Night Baker"},
        *(
            [{"field": "publishDate", "from": job["publishDate"], "to": publish}]
            if publish != job["publishDate"]
            else []
        ),
        {"field": "status", "from": "draft", "to": "active"},
        {
            "field": "categories",
            "from": [{"id": 12, "name": "Hospitality & Tourism"}],
            "to": [{"id": 1, "name": "Accounting & Finance"}],
        },
    ]
    by_reference = api.put(JOBS + DRY, json={"referenceId": "CH-1", "title": "X"}, key=employer.key)
    assert by_reference.json["changes"] == [{"field": "title", "from": "Senior Baker", "to": "X"}]


def test_a_dry_run_that_changes_nothing_or_creates_has_no_changes(
    api: Api, employer: Account
) -> None:
    job = create_job(api, employer, referenceId="CH-2")
    same = api.put(f"{JOBS}/{job['id']}{DRY}", json={"title": job["title"]}, key=employer.key)
    assert same.json["changes"] == []
    new = api.post(JOBS + DRY, json=job_body(referenceId="CH-3"), key=employer.key)
    assert new.json["changes"] == []
    assert (
        "changes" not in api.put(f"{JOBS}/{job['id']}", json={"title": "Y"}, key=employer.key).json
    )
