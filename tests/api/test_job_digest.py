"""GET /jobs/digest (C24): a client that kept the referenceId and ETag of each job it wrote
computes the same hashes itself, and finds the one bucket that differs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.jobs import digest as job_digest
from models.jobs import upkeep
from tests.conftest import Account, Api
from tests.factories import JOBS, entries, job_body, problem

DIGEST = f"{JOBS}/digest"
EMPTY = hashlib.sha256(b"").hexdigest()


def client_hash(held: Mapping[Any, str]) -> str:
    """What C24 says a client computes from the (referenceId, ETag) pairs it holds."""
    lines = sorted(f"{ref or ''}\t{tag}\n" for ref, tag in held.items())
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def bucket(ref: str) -> int:
    return hashlib.sha256(ref.encode()).digest()[0]


def write(api: Api, account: Account, ref: str, **overrides: Any) -> str:
    """PUT a job by referenceId (active unless told); the ETag answered."""
    body = job_body(referenceId=ref, **{"status": "active", **overrides})
    written = api.put(JOBS, key=account.key, json=body)
    assert written.status_code in (200, 201), written.text
    return str(written.headers["ETag"])


def test_an_employer_without_jobs_has_each_status_empty(api: Api, employer: Account) -> None:
    got = api.get(DIGEST, key=employer.key)
    assert got.status_code == 200 and got.headers["Cache-Control"] == "private, no-cache"
    assert got.json == {
        "statuses": [
            {"status": s, "count": 0, "hash": EMPTY} for s in ("active", "archived", "draft")
        ]
    }


def test_the_client_computes_each_status_hash_from_the_etags_its_writes_answered(
    api: Api, employer: Account
) -> None:
    active = {ref: write(api, employer, ref) for ref in ("BAK-1", "BAK-2", "Été-3")}
    drafts = {"BAK-9": write(api, employer, "BAK-9", status="draft")}
    got = api.get(DIGEST, key=employer.key).json["statuses"]
    assert got == [
        {"status": "active", "count": 3, "hash": client_hash(active)},
        {"status": "archived", "count": 0, "hash": EMPTY},
        {"status": "draft", "count": 1, "hash": client_hash(drafts)},
    ]


def test_a_job_without_a_reference_id_has_an_empty_one_and_is_bucketed_by_its_id(
    api: Api, employer: Account
) -> None:
    created = api.post(JOBS, key=employer.key, json=job_body(status="active"))
    tag, job_id = created.headers["ETag"], created.json["id"]
    whole = api.get(DIGEST, key=employer.key, params={"status": "active"}).json
    assert whole["hash"] == client_hash({None: tag})
    assert whole["buckets"] == [{"bucket": bucket(str(job_id)), "count": 1, "hash": whole["hash"]}]
    listed = api.get(
        DIGEST, key=employer.key, params={"status": "active", "bucket": bucket(str(job_id))}
    ).json
    assert listed["jobs"] == [{"referenceId": None, "id": job_id, "etag": tag}]


def test_a_change_moves_its_status_hash_and_one_bucket_which_lists_the_new_etag(
    api: Api, employer: Account
) -> None:
    refs = [f"REQ-{n}" for n in range(12)]
    held = {ref: write(api, employer, ref) for ref in refs}
    before = api.get(DIGEST, key=employer.key, params={"status": "active"}).json
    assert before["count"] == 12 and before["hash"] == client_hash(held)
    assert sum(b["count"] for b in before["buckets"]) == 12
    assert [b["bucket"] for b in before["buckets"]] == sorted({bucket(r) for r in refs})

    changed = write(api, employer, "REQ-5", title="Head baker")
    assert changed != held["REQ-5"]
    after = api.get(DIGEST, key=employer.key, params={"status": "active"}).json
    assert after["hash"] != before["hash"]
    differ = [b for b, a in zip(before["buckets"], after["buckets"], strict=True) if b != a]
    assert [b["bucket"] for b in differ] == [bucket("REQ-5")]

    listed = api.get(
        DIGEST, key=employer.key, params={"status": "active", "bucket": bucket("REQ-5")}
    ).json
    mine = {r: t for r, t in held.items() if bucket(r) == bucket("REQ-5")} | {"REQ-5": changed}
    assert listed["status"] == "active" and listed["bucket"] == bucket("REQ-5")
    assert listed["count"] == len(mine) and listed["hash"] == client_hash(mine)
    assert [j["referenceId"] for j in listed["jobs"]] == sorted(mine)
    job = next(j for j in listed["jobs"] if j["referenceId"] == "REQ-5")
    assert (
        job["etag"] == changed == api.get(f"{JOBS}/{job['id']}", key=employer.key).headers["ETag"]
    )


def test_an_empty_bucket_lists_no_job(api: Api, employer: Account) -> None:
    write(api, employer, "ONLY")
    empty = (bucket("ONLY") + 1) % 256
    got = api.get(DIGEST, key=employer.key, params={"status": "active", "bucket": empty})
    assert got.json == {"status": "active", "bucket": empty, "count": 0, "hash": EMPTY, "jobs": []}


def test_the_digest_is_the_keys_employers_only(
    api: Api, employer: Account, make_employer: Any
) -> None:
    write(api, employer, "MINE")
    other = make_employer("Other Corp")
    assert api.get(DIGEST, key=other.key).json["statuses"][0] == {
        "status": "active",
        "count": 0,
        "hash": EMPTY,
    }


def test_expiry_moves_a_job_to_archived_with_the_etag_a_get_then_answers(
    api: Api, employer: Account, sessions: sessionmaker[Session], clock: Any
) -> None:
    write(api, employer, "SOON", closeDate=str(clock() + timedelta(days=1)))
    with sessions() as s:
        upkeep.expire(s, today=clock() + timedelta(days=2))
        s.commit()
    job_id = api.get(JOBS, key=employer.key).json["data"][0]["id"]
    tag = api.get(f"{JOBS}/{job_id}", key=employer.key).headers["ETag"]
    got = api.get(DIGEST, key=employer.key).json["statuses"]
    assert got[0] == {"status": "active", "count": 0, "hash": EMPTY}
    assert got[1] == {"status": "archived", "count": 1, "hash": client_hash({"SOON": tag})}


def test_renaming_the_employer_changes_every_etag_and_the_digest(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    tag = write(api, employer, "R-1")
    before = api.get(DIGEST, key=employer.key).json
    with sessions() as s:
        employers.get_employer(s, employer.id).name = "Érable inc."
        s.commit()
    after = api.get(DIGEST, key=employer.key).json
    job_id = api.get(JOBS, key=employer.key).json["data"][0]["id"]
    renamed = api.get(f"{JOBS}/{job_id}", key=employer.key, headers={"If-None-Match": tag})
    assert renamed.status_code == 200 and renamed.headers["ETag"] != tag
    assert after != before
    assert after["statuses"][0]["hash"] == client_hash({"R-1": renamed.headers["ETag"]})


@pytest.mark.parametrize(
    ("params", "wanted"),
    [
        ({"bucket": "256", "status": "active"}, [("bucket", "out_of_range")]),
        ({"bucket": "-1", "status": "active"}, [("bucket", "invalid_type")]),
        ({"bucket": "x", "status": "active"}, [("bucket", "invalid_type")]),
        ({"bucket": "3"}, [("status", "required")]),
        ({"status": "open"}, [("status", "out_of_range")]),
        (
            {"status": "open", "bucket": "999"},
            [("status", "out_of_range"), ("bucket", "out_of_range")],
        ),
    ],
)
def test_a_bad_parameter_is_an_invalid_query(
    api: Api, employer: Account, params: dict[str, str], wanted: list[tuple[str, str]]
) -> None:
    got = api.get(DIGEST, key=employer.key, params=params)
    assert entries(got, 400, "invalid_query") == wanted


def test_the_digest_needs_a_key(api: Api) -> None:
    problem(api.get(DIGEST), 401, "unauthorized")


def test_the_read_shape_is_the_one_its_etags_were_derived_for(api: Api, employer: Account) -> None:
    """A job's ETag is derived from its id, version and employer name, and READ_SHAPE: a
    change to the members GET answers must raise READ_SHAPE (and then this list), or a
    client's If-None-Match would keep a job of the old shape as unchanged."""
    job_id = api.post(JOBS, key=employer.key, json=job_body()).json["id"]
    members = list(api.get(f"{JOBS}/{job_id}", key=employer.key).json)
    assert (job_digest.READ_SHAPE, members) == (
        "2",
        [
            "id", "referenceId", "employer", "title", "publishDate", "closeDate",
            "confidential", "autoRefresh", "status", "locations", "workplaceType",
            "applicantLocations", "categories", "positionType", "salary", "description",
            "applicantRoutingType", "applicationEmail", "applicationUrl", "language",
            "translation", "updatedAt", "aiScreening", "existingVacancy", "takenDown",
            "questions",
        ],
    )  # fmt: skip
