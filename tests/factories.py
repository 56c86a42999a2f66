"""Bodies of valid requests, to be broken one rule at a time by the tests."""

from __future__ import annotations

from typing import Any


def job_body(**overrides: Any) -> dict[str, Any]:
    """A valid write-shape body (POST), every required property present; active in Toronto,
    it complies with Ontario's rules (C13): pay, and both posting statements. A member
    overridden with `...` is left out."""
    body: dict[str, Any] = {
        "title": "Senior Baker",
        "locations": [{"description": "Toronto, ON"}],
        "categories": [{"id": 12}],
        "positionType": {"id": 1},
        "salary": {"amount": 52000, "period": {"id": 1}},
        "description": "<p>Bake <strong>bread</strong>.</p>",
        "applicantRoutingType": {"id": 1},
        "applicationEmail": "jobs@maple.test",
        "aiScreening": False,
        "existingVacancy": True,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


JOBS = "/api/v1.1/jobs"


def create_job(api: Any, account: Any, **overrides: Any) -> dict[str, Any]:
    """POST a valid job (with `overrides`) for `account` and return its read shape (the
    answer without the write's `warnings`, C10)."""
    result = api.post(JOBS, json=job_body(**overrides), key=account.key)
    assert result.status_code == 201, result.text
    return read_shape(result.json)


def read_shape(written: dict[str, Any]) -> dict[str, Any]:
    """A write's answer as a GET shows the job: without `warnings`, which every successful
    write answers (C10) and no read does."""
    assert isinstance(written.get("warnings"), list), written
    return {k: v for k, v in written.items() if k != "warnings"}


def problem(result: Any, status: int, code: str) -> dict[str, Any]:
    """Assert `result` is a C1 problem with `status` and `code`, and return its body."""
    assert result.status_code == status, result.text
    assert result.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = result.json
    assert body["status"] == status and body["code"] == code, body
    assert body["type"] == "about:blank" and body["title"]
    return body


def entries(
    result: Any, status: int = 422, code: str = "validation_failed"
) -> list[tuple[str, str]]:
    """The (field, code) pairs of a 422 (or a 400 invalid_query, with its status and code)."""
    body = problem(result, status, code)
    return [(e["field"], e["code"]) for e in body["errors"]]


def unstamped(job: dict[str, Any]) -> dict[str, Any]:
    """A job without `updatedAt` (C10), which every stored change moves: for comparing the
    job's values across writes (or between two jobs) rather than when each was written."""
    return {k: v for k, v in job.items() if k != "updatedAt"}


def take_down(api: Any, sessions: Any, job_id: int) -> None:
    """Report the job through the API and have the operator take it down (C13)."""
    from models import reports
    from models.db.unit_of_work import session_scope

    reported = api.post(
        f"{JOBS}/{job_id}/reports",
        json={"reason": "scam", "details": "Asks for a fee."},
        remote_addr="203.0.113.7",
    )
    assert reported.status_code == 202, reported.text
    with session_scope(sessions) as s:
        reports.resolve(s, reported.json["id"], take_down=True, note=None)
