"""C13 fraud reports through the JSON twin, and taking a job down: 202 on active jobs, 404 on
drafts, archived and unknown jobs, 410 once taken down; every bad field at once; a flood is
429 in a count apart from applications; a job taken down stays down (409 on re-publish)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit, representations
from api.app import Collaborators, create_app
from models import reports
from models.core.settings import Settings
from models.db.entities import JobReport
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, entries, job_body, problem

REPORT = {"reason": "scam", "details": "Asks for a fee to apply.", "email": "ann@example.org"}


def report(api: Api, job_id: int, body: Any = REPORT, addr: str = "203.0.113.7") -> Any:
    return api.post(f"{JOBS}/{job_id}/reports", json=body, remote_addr=addr)


def stored(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobReport)) or 0)


def test_a_report_on_an_active_job_is_stored_and_answered_202_without_a_location(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, status="active")
    result = report(api, job["id"])
    assert result.status_code == 202 and "location" not in result.headers
    assert result.json == {"id": result.json["id"], "status": "open"}
    with sessions() as s:
        shown = representations.report(reports.shown(reports.get(s, result.json["id"])))
    assert {k: shown[k] for k in ("jobId", "reason", "details", "email", "status")} == {
        "jobId": job["id"],
        **REPORT,
        "status": "open",
    }
    assert shown["resolvedAt"] is None and shown["note"] is None
    bare = report(api, job["id"], {"reason": "other", "details": " x "})
    assert bare.status_code == 202


@pytest.mark.parametrize("status", ["draft", "archived"])
def test_a_report_on_a_job_that_is_not_active_or_unknown_is_404(
    api: Api, employer: Account, sessions: sessionmaker[Session], status: str
) -> None:
    job = create_job(api, employer, status=status)
    problem(report(api, job["id"]), 404, "not_found")
    problem(report(api, 987654), 404, "not_found")
    problem(report(api, 2**31), 404, "not_found")
    assert stored(sessions) == 0


def test_every_bad_field_is_one_422_and_nothing_is_stored(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job_id = create_job(api, employer, status="active")["id"]
    bad = {"reason": "spam", "details": "x" * 2001, "email": "not an address"}
    assert entries(report(api, job_id, bad)) == [
        ("reason", "out_of_range"),
        ("details", "too_long"),
        ("email", "invalid_format"),
    ]
    assert entries(report(api, job_id, {"details": "   "})) == [
        ("reason", "required"),
        ("details", "required"),
    ]
    assert entries(report(api, job_id, {"reason": 1, "details": 2})) == [
        ("reason", "invalid_type"),
        ("details", "invalid_type"),
    ]
    assert report(api, job_id, {"reason": "scam", "details": "x" * 2000}).status_code == 202
    assert stored(sessions) == 1


def test_a_flood_of_reports_is_429_in_a_count_apart_from_applications(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, make_employer: Any
) -> None:
    limiter = ratelimit.MemoryLimiter(2, 60)
    api = Api(create_app(settings, sessions, Collaborators(limiter=limiter), today=clock))
    employer = make_employer()
    job_id = create_job(api, employer, status="active")["id"]
    assert report(api, job_id).status_code == 202
    assert report(api, job_id).status_code == 202
    flooded = report(api, job_id)
    problem(flooded, 429, "rate_limited")
    assert int(flooded.headers["retry-after"]) >= 1
    assert report(api, job_id, addr="198.51.100.9").status_code == 202  # another client
    applicant = {"name": "Ann Baker", "email": "ann@example.org"}
    applied = api.post(f"{JOBS}/{job_id}/applications", json=applicant, remote_addr="203.0.113.7")
    assert applied.status_code == 202  # the reports did not use up the applications
    assert stored(sessions) == 3


def test_taking_a_job_down_archives_it_for_good(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, status="active", referenceId="T-1")
    path = f"{JOBS}/{job['id']}"
    first = report(api, job["id"]).json["id"]
    with sessions() as s:
        done = representations.report(
            reports.resolve(s, first, take_down=True, note="fee scam").report
        )
        s.commit()
    assert done["status"] == "taken_down" and done["note"] == "fee scam" and done["resolvedAt"]
    read = api.get(path, key=employer.key)
    assert read.json["status"] == "archived" and read.json["takenDown"] is True
    problem(report(api, job["id"]), 410, "gone")
    writes: list[tuple[str, dict[str, Any]]] = [
        (path, {"status": "active"}),
        (path, {"status": "active", "title": ""}),  # 409 before 422 (C1)
        (path + "?dryRun=true", {"status": "active"}),
        (JOBS, job_body(referenceId="T-1", status="active")),  # as a sync item applies
    ]
    for target, body in writes:
        problem(api.put(target, json=body, key=employer.key), 409, "job_taken_down")
    assert api.get(path, key=employer.key).json["status"] == "archived"
    kept = api.put(path, json={"title": "Still down", "takenDown": False}, key=employer.key)
    assert kept.status_code == 200 and kept.json["takenDown"] is True
    with sessions() as s, pytest.raises(ValueError, match="already taken_down"):
        reports.resolve(s, first, take_down=False, note=None)
    assert api.delete(path, key=employer.key).status_code == 204
    fresh = create_job(api, employer, status="active", referenceId="T-1")
    assert fresh["takenDown"] is False  # a new job: the operator can take it down too


def test_a_dismissed_report_leaves_the_job_as_it_was(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, status="active")
    first = report(api, job["id"]).json["id"]
    with sessions() as s:
        assert reports.resolve(s, first, take_down=False, note=None).report.status == "dismissed"
        s.commit()
    after = api.get(f"{JOBS}/{job['id']}", key=employer.key).json
    assert after["status"] == "active" and after["takenDown"] is False
    with sessions() as s:
        assert [r.id for r in reports.listing(s, "dismissed")] == [first]
        assert reports.listing(s, "open") == []


def test_taking_a_job_down_emits_job_taken_down_with_the_job_header(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    import json
    from datetime import UTC, datetime

    from models.db.entities import WebhookDelivery, WebhookEndpoint, WebhookMessage

    job = create_job(api, employer, status="active", referenceId="H-1")
    now = datetime(2026, 3, 10, tzinfo=UTC)
    with sessions() as s:
        for events in (["job.taken_down"], ["job.expired"]):
            s.add(
                WebhookEndpoint(
                    employer_id=employer.id,
                    url="https://hooks.example.com/in",
                    events=json.dumps(events),
                    status="enabled",
                    secret="token",
                    created_at=now,
                    updated_at=now,
                )
            )
        s.commit()
    first = report(api, job["id"]).json["id"]
    with sessions() as s:
        resolved = reports.resolve(s, first, take_down=True, note=None)
        s.commit()
    with sessions() as s:
        [message] = s.scalars(select(WebhookMessage)).all()
        assert resolved.deliveries == list(s.scalars(select(WebhookDelivery.id)))
        assert len(resolved.deliveries) == 1  # the endpoint that takes job.taken_down only
    payload = json.loads(message.payload)
    assert payload["type"] == "job.taken_down"
    listed = api.get(JOBS, key=employer.key).json["data"]
    assert payload["data"] == next(j for j in listed if j["id"] == job["id"])  # the header
    assert payload["data"]["status"] == "archived"
