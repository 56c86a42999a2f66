"""C23: the employer's own keys over the API. Scopes limit what a key may do (403
insufficient_scope), a key may not grant what it does not hold, keys expire, rotate with an
overlap and are revoked at once; keys made before scopes hold them all; the secret is shown
once and stored as a hash only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.db.entities import ApiKey
from models.keys import SCOPES
from tests.conftest import Account, Api
from tests.factories import JOBS, create_job, entries, job_body, problem

KEYS = "/api/v1.1/keys"
EVERY = list(SCOPES)


def make_key(api: Api, key: str, **body: Any) -> dict[str, Any]:
    made = api.post(KEYS, json=body, key=key)
    assert made.status_code == 201, made.text
    assert made.headers["Cache-Control"] == "no-store"
    assert made.headers["Location"].endswith(f"{KEYS}/{made.json['id']}")
    shown: dict[str, Any] = made.json
    return shown


def scope_denied(result: Any, scope: str, *, challenged: bool = True) -> None:
    """403 insufficient_scope naming `scope`; `challenged`: the route itself needs it."""
    body = problem(result, 403, "insufficient_scope")
    assert scope in body["detail"]
    if challenged:
        assert f'scope="{scope}"' in result.headers["WWW-Authenticate"]


def test_a_key_made_before_scopes_holds_them_all_and_lists_without_its_secret(
    api: Api, employer: Account
) -> None:
    listed = api.get(KEYS, key=employer.key)
    assert listed.status_code == 200 and listed.headers["Cache-Control"] == "no-store"
    [mine] = listed.json["data"]
    assert mine["prefix"] == employer.key[:12] and mine["scopes"] == EVERY
    assert mine["expiresAt"] is None and "key" not in mine
    assert employer.key not in listed.text


def test_a_read_only_key_reads_jobs_and_nothing_else(api: Api, employer: Account) -> None:
    job = create_job(api, employer)
    made = make_key(api, employer.key, scopes=["jobs:read"], description="feed reader")
    assert (made["scopes"], made["description"]) == (["jobs:read"], "feed reader")
    reader = made["key"]
    assert reader.startswith("jp_") and reader[:12] == made["prefix"]
    assert api.get(JOBS, key=reader).status_code == 200
    assert api.get(f"{JOBS}/{job['id']}", key=reader).status_code == 200
    scope_denied(api.post(JOBS, json=job_body(), key=reader), "jobs:write")
    scope_denied(api.put(f"{JOBS}/{job['id']}", json={"title": "x"}, key=reader), "jobs:write")
    scope_denied(api.delete(f"{JOBS}/{job['id']}", key=reader), "jobs:write")
    scope_denied(api.get(f"{JOBS}/{job['id']}/applications", key=reader), "applications:read")
    scope_denied(api.get("/api/v1.1/applications", key=reader), "applications:read")
    scope_denied(api.get("/api/v1.1/syncs", key=reader), "syncs")
    scope_denied(api.get("/api/v1.1/webhooks", key=reader), "webhooks")
    scope_denied(api.get("/api/v1.1/employer", key=reader), "employer")
    scope_denied(api.get(KEYS, key=reader), "employer")
    # An override is the method it names (C7): a POST overridden to DELETE needs jobs:write.
    overridden = api.post(
        f"{JOBS}/{job['id']}", key=reader, headers={"X-HTTP-Method-Override": "DELETE"}
    )
    scope_denied(overridden, "jobs:write")
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).status_code == 200


def test_a_key_grants_only_what_it_holds(api: Api, employer: Account) -> None:
    manager = make_key(api, employer.key, scopes=["employer", "jobs:read"])["key"]
    granting = api.post(KEYS, json={"scopes": ["jobs:write"]}, key=manager)
    scope_denied(granting, "jobs:write", challenged=False)
    by_default = make_key(api, manager)
    assert by_default["scopes"] == ["jobs:read", "employer"]
    everything = [k for k in api.get(KEYS, key=employer.key).json["data"] if k["scopes"] == EVERY]
    rotating = api.post(f"{KEYS}/{everything[0]['id']}/rotate", key=manager)
    scope_denied(rotating, "jobs:write", challenged=False)
    revoking = api.delete(f"{KEYS}/{everything[0]['id']}", key=manager)
    scope_denied(revoking, "jobs:write", challenged=False)


def test_every_bad_member_is_named_at_once(api: Api, employer: Account) -> None:
    past = (utcnow() - timedelta(minutes=1)).isoformat()
    body = {"scopes": ["jobs:read", "jobs:read", "admin", 3], "expiresAt": past, "description": 5}
    assert sorted(entries(api.post(KEYS, json=body, key=employer.key))) == [
        ("description", "invalid_type"),
        ("expiresAt", "out_of_range"),
        ("scopes[1]", "duplicate"),
        ("scopes[2]", "out_of_range"),
        ("scopes[3]", "invalid_type"),
    ]
    assert entries(api.post(KEYS, json={"scopes": []}, key=employer.key)) == [("scopes", "too_few")]
    assert entries(api.post(KEYS, json={"scopes": "jobs:read"}, key=employer.key)) == [
        ("scopes", "invalid_type")
    ]
    far = (utcnow() + timedelta(days=4 * 366)).isoformat()
    assert entries(api.post(KEYS, json={"expiresAt": far}, key=employer.key)) == [
        ("expiresAt", "out_of_range")
    ]
    assert entries(api.post(KEYS, json={"expiresAt": "tomorrow"}, key=employer.key)) == [
        ("expiresAt", "invalid_format")
    ]
    assert len(api.get(KEYS, key=employer.key).json["data"]) == 1  # nothing was made


def test_a_key_stops_at_its_expiry(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    soon = (utcnow() + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    made = make_key(api, employer.key, scopes=["jobs:read"], expiresAt=soon)
    assert made["expiresAt"] is not None
    assert api.get(JOBS, key=made["key"]).status_code == 200
    with sessions() as s:  # an hour later
        s.execute(
            update(ApiKey)
            .where(ApiKey.id == made["id"])
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        s.commit()
    problem(api.get(JOBS, key=made["key"]), 401, "unauthorized")
    assert made["id"] not in [k["id"] for k in api.get(KEYS, key=employer.key).json["data"]]
    problem(api.get(f"{KEYS}/{made['id']}", key=employer.key), 404, "not_found")


@pytest.mark.parametrize("overlap", [0, 3600])
def test_a_rotated_key_works_beside_its_successor_for_the_overlap(
    api: Api, employer: Account, overlap: int
) -> None:
    old = make_key(api, employer.key, scopes=["jobs:read", "jobs:write"], description="ATS")
    rotated = api.post(
        f"{KEYS}/{old['id']}/rotate", json={"overlapSeconds": overlap}, key=employer.key
    )
    assert rotated.status_code == 201, rotated.text
    new = rotated.json
    assert (new["scopes"], new["description"]) == (old["scopes"], "ATS")
    assert new["key"] != old["key"] and new["id"] != old["id"]
    assert api.get(JOBS, key=new["key"]).status_code == 200
    if overlap:
        assert api.get(JOBS, key=old["key"]).status_code == 200
        shown = api.get(f"{KEYS}/{old['id']}", key=employer.key).json
        assert shown["expiresAt"] is not None
    else:
        problem(api.get(JOBS, key=old["key"]), 401, "unauthorized")


def test_a_rotation_takes_a_whole_overlap_within_a_week(api: Api, employer: Account) -> None:
    old = make_key(api, employer.key, scopes=["jobs:read"])
    path = f"{KEYS}/{old['id']}/rotate"
    for bad, code in ((-1, "out_of_range"), (8 * 86400, "out_of_range"), ("1h", "invalid_type")):
        assert entries(api.post(path, json={"overlapSeconds": bad}, key=employer.key)) == [
            ("overlapSeconds", code)
        ]
    assert api.get(JOBS, key=old["key"]).status_code == 200


def test_a_revoked_key_stops_at_once_and_another_employers_key_is_absent(
    api: Api, employer: Account, make_employer: Any
) -> None:
    made = make_key(api, employer.key, scopes=["jobs:read"])
    other = make_employer("Birch Ltd")
    problem(api.delete(f"{KEYS}/{made['id']}", key=other.key), 404, "not_found")
    problem(api.post(f"{KEYS}/{made['id']}/rotate", key=other.key), 404, "not_found")
    assert api.get(JOBS, key=made["key"]).status_code == 200
    assert api.delete(f"{KEYS}/{made['id']}", key=employer.key).status_code == 204
    problem(api.get(JOBS, key=made["key"]), 401, "unauthorized")
    problem(api.delete(f"{KEYS}/{made['id']}", key=employer.key), 404, "not_found")
    problem(api.get(f"{KEYS}/nope", key=employer.key), 404, "not_found")


def test_a_key_records_when_it_was_last_used_and_stores_no_secret(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    made = make_key(api, employer.key, scopes=["jobs:read"])
    assert made["lastUsedAt"] is None
    assert api.get(JOBS, key=made["key"]).status_code == 200
    [shown] = [k for k in api.get(KEYS, key=employer.key).json["data"] if k["id"] == made["id"]]
    assert shown["lastUsedAt"] is not None
    with sessions() as s:
        row = s.execute(select(ApiKey).where(ApiKey.id == made["id"])).scalar_one()
        stored = [str(getattr(row, c.key)) for c in ApiKey.__table__.columns]
    assert not any(made["key"] in value for value in stored)


def keyed_operations() -> list[tuple[str, str]]:
    """Every operation of the OpenAPI document that takes a key."""
    from api.openapi import document

    return sorted(
        (method.upper(), path)
        for path, item in document()["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and op.get("security")
    )


@pytest.mark.parametrize(("method", "path"), keyed_operations())
def test_every_keyed_operation_needs_its_scope_and_no_other(
    api: Api, employer: Account, method: str, path: str
) -> None:
    """A key with every scope but the one the route needs is 403 before anything else is
    read; a key with that one alone gets past the check (whatever it answers next)."""
    from api.auth import scope_of

    needed = scope_of(path, method)
    others = [s for s in EVERY if s != needed]
    without = make_key(api, employer.key, scopes=others)["key"]
    made = make_key(api, employer.key, scopes=[needed])
    alone = made["key"]
    # A key's own routes name the key itself: it may rotate or revoke what it holds.
    own = str(made["id"]) if path.startswith(f"{KEYS}/") else "1"
    url = path.replace("{id}", own).replace("{messageId}", "msg_x")
    body: dict[str, Any] | None = None if method in ("GET", "HEAD", "DELETE") else {}
    scope_denied(api.request(method, url, json=body, key=without), needed)
    answered = api.request(method, url, json=body, key=alone)
    assert answered.status_code != 403 and answered.status_code != 401, answered.text
