"""Bodies of valid requests, to be broken one rule at a time by the tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from models.jobs.feeds import Filters


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


def jobs_to_search(api: Any, account: Any, clock: Any) -> dict[str, dict[str, Any]]:
    """Three active jobs that the public search's filters (C17) tell apart: an old cook (10
    days before `clock`'s today), a remote contract developer paid 83,200 a year, and a
    baker in Vancouver paid 48,000 a year; the cook and the baker in category 12."""
    clock.today -= timedelta(days=10)
    old = create_job(api, account, status="active", title="Old cook", categories=[{"id": 12}])
    clock.today += timedelta(days=10)
    remote = create_job(
        api,
        account,
        status="active",
        title="Remote developer",
        categories=[{"id": 14}],
        workplaceType="remote",
        positionType={"id": 3},
        salary={"amount": 40, "period": {"id": 5}},  # 83,200 a year
    )
    vancouver = create_job(
        api,
        account,
        status="active",
        title="Vancouver baker",
        locations=[{"description": "Vancouver, BC"}],
        salary={"amount": 4000, "period": {"id": 2}},  # 48,000 a year
    )
    return {"old": old, "remote": remote, "vancouver": vancouver}


# A search with every filter of the public search set (C17), and its query string.
EVERY_FILTER = Filters(
    q="café",
    category=12,
    province="ON",
    place=6167865,
    position_type=1,
    workplace_type="remote",
    min_pay=50000,
    days=7,
)
EVERY_FILTER_QUERY = (
    "q=caf%C3%A9&category=12&province=ON&place=6167865&positionType=1&workplaceType=remote"
    "&minPay=50000&days=7"
)


def read_shape(written: dict[str, Any]) -> dict[str, Any]:
    """A write's answer as a GET shows the job: without `warnings`, which every successful
    write answers (C10) and no read does, nor a dry run's `changes`."""
    assert isinstance(written.get("warnings"), list), written
    return {k: v for k, v in written.items() if k not in ("warnings", "changes")}


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
