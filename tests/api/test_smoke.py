"""First contact: create, read, list, and the C1 shape of an error."""

from __future__ import annotations

from typing import Any

from tests.factories import read_shape


def test_post_then_get_returns_the_complete_job(api: Any, employer: Any, job_body: Any) -> None:
    created = api.post("/api/v1.1/jobs", json=job_body(), key=employer.key)
    assert created.status_code == 201
    job = read_shape(created.json)
    assert created.headers["location"].endswith(f"/api/v1.1/jobs/{job['id']}")
    fetched = api.get(f"/api/v1.1/jobs/{job['id']}", key=employer.key)
    assert fetched.json == job
    assert job["employer"] == {"id": employer.id, "name": employer.name}
    assert job["status"] == "draft" and job["referenceId"] is None


def test_missing_key_is_401_in_the_c1_shape(api: Any) -> None:
    result = api.get("/api/v1.1/jobs")
    assert result.status_code == 401
    assert result.headers["content-type"] == "application/problem+json"
    assert result.json["code"] == "unauthorized"


def test_a_deleted_jobs_id_never_names_a_new_job(api: Any, employer: Any, job_body: Any) -> None:
    """C1: a 404 for a deleted id must stay a 404 (SQLite would reuse the last rowid)."""
    first = api.post("/api/v1.1/jobs", json=job_body(), key=employer.key).json["id"]
    assert api.delete(f"/api/v1.1/jobs/{first}", key=employer.key).status_code == 204
    second = api.post("/api/v1.1/jobs", json=job_body(), key=employer.key).json["id"]
    assert second != first
    assert api.get(f"/api/v1.1/jobs/{first}", key=employer.key).status_code == 404
