"""C2 authentication and employers: the API-Key decides the employer; another employer's job
is 404 by id and by referenceId (existence never leaks); CORS preflights need no key."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from tests.factories import JOBS, create_job, job_body, problem


def _every_job_operation(job_id: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", JOBS, None),
        ("POST", JOBS, job_body()),
        ("PUT", JOBS, job_body(referenceId="R")),
        ("DELETE", JOBS, {"referenceId": "R"}),
        ("GET", f"{JOBS}/{job_id}", None),
        ("PUT", f"{JOBS}/{job_id}", {"title": "x"}),
        ("DELETE", f"{JOBS}/{job_id}", None),
    ]


@pytest.mark.parametrize("key", [None, "", "jp_not-a-key", "jp_\u00e9" * 5])
def test_every_job_operation_without_a_valid_key_is_401(
    api: Any, employer: Any, key: str | None
) -> None:
    """C1/C2: API-Key missing, empty or unknown is 401 unauthorized."""
    job = create_job(api, employer)
    headers = {} if key is None else {"API-Key": key}
    for method, path, body in _every_job_operation(job["id"]):
        result = api.request(method, path, json=body, headers=headers)
        problem(result, 401, "unauthorized")
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).status_code == 200


def test_a_key_of_the_right_prefix_but_wrong_secret_is_401(api: Any, employer: Any) -> None:
    """C2: the whole key is compared, not its visible prefix."""
    forged = employer.key[:12] + "A" * (len(employer.key) - 12)
    problem(api.get(JOBS, key=forged), 401, "unauthorized")


def test_a_revoked_key_is_401_and_the_other_keys_still_work(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    """C2: an employer may hold several keys; each can be revoked."""
    with sessions() as s:
        second = employers.issue_key(s, employer.id)
        s.commit()
    assert api.get(JOBS, key=second.key).status_code == 200
    with sessions() as s:
        employers.revoke_key(s, employer.key[:12])
        s.commit()
    problem(api.get(JOBS, key=employer.key), 401, "unauthorized")
    assert api.get(JOBS, key=second.key).status_code == 200


def test_the_key_decides_the_employer(api: Any, make_employer: Any) -> None:
    a, b = make_employer("Alpha Bakery"), make_employer("Beta Bakery")
    assert create_job(api, a)["employer"] == {"id": a.id, "name": "Alpha Bakery"}
    assert create_job(api, b)["employer"] == {"id": b.id, "name": "Beta Bakery"}


def test_a_confidential_job_still_shows_the_real_name_to_its_owner(api: Any, employer: Any) -> None:
    """C2: API responses to the owner always show its real name."""
    job = create_job(api, employer, confidential=True)
    assert job["employer"]["name"] == employer.name


def test_employers_cannot_see_change_or_delete_each_others_jobs_by_id(
    api: Any, make_employer: Any
) -> None:
    """C1/C2: another employer's job is 404, exactly like a missing one."""
    a, b = make_employer("Alpha"), make_employer("Beta")
    job = create_job(api, a, referenceId="SHARED")
    path = f"{JOBS}/{job['id']}"
    missing = api.get(f"{JOBS}/2147483647", key=b.key).json
    seen = problem(api.get(path, key=b.key), 404, "not_found")
    assert set(seen) == set(missing)
    problem(api.put(path, json={"title": "Hijacked"}, key=b.key), 404, "not_found")
    problem(api.put(path, json={"title": ""}, key=b.key), 404, "not_found")
    problem(api.delete(path, key=b.key), 404, "not_found")
    problem(
        api.post(path, headers={"X-HTTP-Method-Override": "DELETE"}, key=b.key), 404, "not_found"
    )
    assert api.get(path, key=a.key).json == job


def test_employers_cannot_reach_each_others_jobs_by_reference_id(
    api: Any, make_employer: Any
) -> None:
    """C2: referenceId is unique per employer; two employers may use the same one."""
    a, b = make_employer("Alpha"), make_employer("Beta")
    job_a = create_job(api, a, referenceId="SHARED", title="Alpha's")
    problem(api.delete(JOBS, json={"referenceId": "SHARED"}, key=b.key), 404, "not_found")
    # B's PUT with A's referenceId creates B's own job; A's is untouched.
    created = api.put(JOBS, json=job_body(referenceId="SHARED", title="Beta's"), key=b.key)
    assert created.status_code == 201 and created.json["id"] != job_a["id"]
    assert created.json["employer"]["id"] == b.id
    # B's POST with the same referenceId is its own duplicate now, not A's.
    problem(
        api.post(JOBS, json=job_body(referenceId="SHARED"), key=b.key),
        409,
        "duplicate_reference_id",
    )
    assert (
        api.put(JOBS, json={"referenceId": "SHARED", "status": "archived"}, key=b.key).json["id"]
        == created.json["id"]
    )
    assert api.get(f"{JOBS}/{job_a['id']}", key=a.key).json == job_a
    assert api.delete(JOBS, json={"referenceId": "SHARED"}, key=b.key).status_code == 204
    assert api.get(f"{JOBS}/{job_a['id']}", key=a.key).json == job_a


def test_the_list_shows_only_the_keys_employer(api: Any, make_employer: Any) -> None:
    a, b = make_employer("Alpha"), make_employer("Beta")
    mine = {create_job(api, a)["id"] for _ in range(2)}
    create_job(api, b)
    listed = api.get(JOBS, key=a.key).json
    assert {j["id"] for j in listed["data"]} == mine and listed["paging"]["total"] == 2


@pytest.mark.parametrize("path", [JOBS, f"{JOBS}/1", "/api/v1.1/positiontypes"])
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_cors_preflight_needs_no_key_and_allows_the_api_headers(
    api: Any, path: str, method: str
) -> None:
    """C2: preflights from any origin, allowing API-Key, Content-Type, X-HTTP-Method-Override."""
    result = api.request(
        "OPTIONS",
        path,
        headers={
            "Origin": "https://board.example",
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "api-key, content-type, x-http-method-override",
        },
    )
    assert result.status_code in (200, 204)
    assert result.headers["access-control-allow-origin"] in ("*", "https://board.example")
    allowed = {h.strip().lower() for h in result.headers["access-control-allow-headers"].split(",")}
    assert {"api-key", "content-type", "x-http-method-override"} <= allowed
    assert "access-control-allow-methods" in result.headers


def test_an_actual_cross_origin_request_carries_the_allow_origin_header(
    api: Any, employer: Any
) -> None:
    result = api.get(JOBS, key=employer.key, headers={"Origin": "https://board.example"})
    assert result.headers["access-control-allow-origin"] in ("*", "https://board.example")
    failed = api.get(JOBS, headers={"Origin": "https://board.example"})
    assert failed.status_code == 401 and "access-control-allow-origin" in failed.headers
