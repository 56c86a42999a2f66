"""The response checker of api/openapi.json (tests/openapi_check.py), which every API test's
answer goes through: it accepts documented responses and rejects the others."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.openapi_check import (
    check_response,
    match_template,
)
from tests.openapi_samples import HTML, JOB, JSON, PROBLEM, V

URL_JOB = {
    **JOB,
    "referenceId": None,
    "salary": None,
    "applicantRoutingType": {"id": 2, "name": "URL"},
    "applicationEmail": None,
    "applicationUrl": "https://careers.example.com/apply/42",
}

HEADER_KEYS = [
    "id",
    "referenceId",
    "employer",
    "title",
    "publishDate",
    "locations",
    "workplaceType",
    "applicantLocations",
    "questions",
    "confidential",
]
HEADER = {k: JOB[k] for k in [*HEADER_KEYS, "status", "updatedAt"]}
FEED_PAGING = {
    "pageSize": 10,
    "next": "http://localhost/api/v1.1/jobs?sort=updatedAt&pageSize=10&cursor=x",
}

PAGING = {
    "total": 21,
    "page": 2,
    "pages": 3,
    "pageSize": 10,
    "previous": "http://localhost/api/v1.1/jobs?status=active&pageSize=10&page=1",
    "next": "http://localhost/api/v1.1/jobs?status=active&pageSize=10&page=3",
}

APPLICATION = {
    "id": 7,
    "jobId": 42,
    "name": "Ada Tremblay",
    "email": "ada@example.test",
    "phone": "+1 (514) 555-0100",
    "coverLetter": "Bonjour.",
    "receivedAt": "2025-05-02T14:03:11.250Z",
    "resume": {"filename": "cv.pdf", "size": 52311, "contentType": "application/pdf"},
    "status": "failed",
    "attempts": 5,
    "sentAt": None,
    "lastError": "550 mailbox unavailable",
    "answers": [{"questionId": "workAuth", "question": "Work in Canada?", "answer": True}],
    "knockedOut": False,
    "knockedOutBy": None,
    "bounce": None,
}

INVALID = {
    "type": "about:blank",
    "title": "Unprocessable Content",
    "status": 422,
    "code": "validation_failed",
    "detail": "The job has 2 invalid fields.",
    "errors": [
        {"field": "locations", "code": "too_many", "message": "At most 3 locations are allowed."},
        {
            "field": "locations[0].description",
            "code": "unknown_location",
            "message": "Unknown location. Did you mean Toronto, ON?",
            "suggestions": ["Toronto, ON"],
        },
    ],
}


def problem(status: int, code: str, title: str = "Error") -> dict[str, Any]:
    return {"type": "about:blank", "title": title, "status": status, "code": code, "detail": "x"}


def dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


# ---------------------------------------------------------------------------- the checker


WARNING = {"field": "closeDate", "code": "closes_soon", "message": "closeDate is in 2 days."}

GOOD = [
    ("GET", f"{V}/jobs/42", 200, JSON, JOB),
    ("GET", f"{V}/jobs/42", 200, "application/json; charset=utf-8", URL_JOB),
    ("POST", f"{V}/jobs", 201, JSON, {**JOB, "warnings": []}),
    ("POST", f"{V}/jobs?dryRun=true", 200, JSON, {**JOB, "id": None, "warnings": [WARNING]}),
    ("PUT", f"{V}/jobs", 201, JSON, {**URL_JOB, "warnings": []}),
    ("PUT", f"{V}/jobs/42", 200, JSON, {**JOB, "warnings": [WARNING, WARNING]}),
    ("GET", f"{V}/jobs?status=active&page=2", 200, JSON, {"data": [HEADER], "paging": PAGING}),
    ("GET", f"{V}/jobs?page=9", 200, JSON, {"data": [], "paging": {**PAGING, "next": None}}),
    ("POST", f"{V}/jobs", 422, PROBLEM, INVALID),
    ("POST", f"{V}/jobs", 409, PROBLEM, problem(409, "duplicate_reference_id")),
    ("GET", f"{V}/jobs/abc", 404, PROBLEM, problem(404, "not_found")),
    ("GET", f"{V}/jobs", 401, PROBLEM, problem(401, "unauthorized")),
    ("PATCH", f"{V}/jobs/42", 405, PROBLEM, problem(405, "method_not_allowed")),
    ("FOO", f"{V}/jobs/42", 501, PROBLEM, problem(501, "method_not_implemented")),
    ("PUT", f"{V}/jobs/42", 405, PROBLEM, problem(405, "method_not_allowed")),
    ("GET", f"{V}/jobs?q=aaa", 414, PROBLEM, problem(414, "uri_too_long")),
    ("POST", f"{V}/jobs", 501, PROBLEM, problem(501, "unsupported_transfer_coding")),
    ("GET", "/healthz", 400, PROBLEM, problem(400, "malformed_request")),
    ("GET", f"{V}/jobs", 400, PROBLEM, problem(400, "malformed_request")),
    ("POST", f"{V}/jobs/42/applications", 202, JSON, {"id": 3, "status": "received"}),
    ("POST", f"{V}/jobs/42/applications", 409, PROBLEM, problem(409, "apply_via_url")),
    ("GET", f"{V}/applications?jobId=42", 200, JSON, {"data": [APPLICATION], "paging": PAGING}),
    ("GET", f"{V}/jobs?sort=updatedAt", 200, JSON, {"data": [HEADER], "paging": FEED_PAGING}),
    (
        "GET",
        f"{V}/applications?sort=receivedAt",
        200,
        JSON,
        {"data": [APPLICATION], "paging": FEED_PAGING},
    ),
    ("GET", f"{V}/applications/7", 200, JSON, {**APPLICATION, "jobId": None, "resume": None}),
    ("GET", f"{V}/positiontypes", 200, JSON, {"data": [{"id": 1, "name": "Full Time"}]}),
    ("GET", f"{V}/locations/9", 200, JSON, JOB["locations"][1]),
    ("GET", "/healthz", 200, JSON, {"status": "ok"}),
    ("GET", "/readyz", 503, PROBLEM, problem(503, "not_ready")),
]


@pytest.mark.parametrize(("method", "path", "status", "content_type", "body"), GOOD)
def test_the_checker_accepts_documented_responses(
    method: str, path: str, status: int, content_type: str, body: Any
) -> None:
    check_response(method, path, status, content_type, dumps(body))


@pytest.mark.parametrize(
    ("method", "path", "status", "content_type", "body"),
    [
        ("DELETE", f"{V}/jobs/42", 204, None, b""),
        ("GET", f"{V}/categories", 304, None, b""),
        ("GET", f"{V}/applications/7/resume", 200, "application/pdf", b"%PDF-1.7"),
        ("GET", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", b"# HELP x\n"),
        ("GET", f"{V}/openapi.json", 304, None, b""),
        ("OPTIONS", f"{V}/jobs/42", 200, None, b""),
        ("GET", "/jobs/42", 200, "text/html; charset=utf-8", b"<!doctype html>"),
        ("GET", "/jobs/42", 404, "text/html; charset=utf-8", b"<!doctype html>"),
        ("PATCH", "/jobs/42", 405, "text/html; charset=utf-8", b"<!doctype html>"),
        ("GET", "/jobs/42/apply", 302, "application/json", b""),
        ("POST", "/jobs/42/apply", 303, None, b""),
        ("POST", "/jobs/42/apply", 422, "text/html; charset=utf-8", b"<!doctype html>"),
        ("POST", "/jobs/42/apply", 400, PROBLEM, dumps(problem(400, "malformed_request"))),
    ],
)
def test_the_checker_accepts_empty_and_binary_bodies(
    method: str, path: str, status: int, content_type: str | None, body: bytes
) -> None:
    check_response(method, path, status, content_type, body)


def bad(**changes: Any) -> dict[str, Any]:
    job = copy.deepcopy(JOB)
    job.update(changes)
    return job


def entry(code: str) -> dict[str, Any]:
    return {**INVALID, "errors": [{"field": "title", "code": code, "message": "x"}]}


BAD = [
    ("GET", f"{V}/jobs/42", 200, JSON, dumps({**JOB, "extra": 1}), "extra"),
    ("GET", f"{V}/jobs/42", 200, JSON, dumps({**JOB, "warnings": []}), "warnings"),
    ("PUT", f"{V}/jobs/42", 200, JSON, dumps(JOB), "'warnings' is a required property"),
    ("PUT", f"{V}/jobs", 200, JSON, dumps({**JOB, "warnings": [{**WARNING, "code": "x"}]}), "'x'"),
    ("GET", f"{V}/jobs/42", 200, JSON, dumps(bad(referenceId="")), "referenceId"),
    ("GET", f"{V}/jobs/42", 200, JSON, dumps(bad(publishDate="2025-5-1")), "publishDate"),
    ("GET", f"{V}/jobs/42", 200, JSON, dumps(bad(salary={"amount": 1})), "salary"),
    ("GET", f"{V}/jobs/42", 200, JSON, dumps(bad(locations=[{"id": 1}])), "locations"),
    ("POST", f"{V}/jobs", 422, PROBLEM, dumps(entry("not_a_code")), "not_a_code"),
    ("POST", f"{V}/jobs", 422, PROBLEM, dumps({**INVALID, "errors": []}), "errors"),
    (
        "GET",
        f"{V}/jobs/42",
        404,
        PROBLEM,
        dumps(problem(404, "no_job")),
        "'no_job' is not one of \\['not_found'\\]",
    ),
    ("GET", f"{V}/jobs/42", 404, PROBLEM, dumps(problem(400, "not_found")), "status"),
    ("GET", f"{V}/jobs/42", 404, JSON, dumps(problem(404, "not_found")), "Content-Type"),
    ("GET", f"{V}/jobs/42", 409, PROBLEM, dumps(problem(409, "x")), "status not documented"),
    ("GET", f"{V}/positiontypes", 401, PROBLEM, dumps(problem(401, "unauthorized")), "status"),
    ("GET", f"{V}/nothing", 200, JSON, b"{}", "path not documented"),
    ("OPTIONS", f"{V}/nothing", 200, None, b"", "path not documented"),
    ("OPTIONS", f"{V}/jobs", 200, JSON, b"{}", "method not documented"),
    ("PATCH", f"{V}/jobs/42", 200, JSON, dumps(JOB), "method not documented"),
    ("PATCH", f"{V}/jobs/42", 405, PROBLEM, dumps(problem(405, "not_found")), "not_found"),
    ("PATCH", f"{V}/jobs/42", 400, PROBLEM, dumps(problem(400, "malformed_json")), "documented"),
    ("GET", "/healthz", 400, PROBLEM, dumps(problem(400, "malformed_json")), "malformed_json"),
    ("DELETE", f"{V}/jobs/42", 204, JSON, b"{}", "no body"),
    ("GET", "/jobs/42", 404, PROBLEM, dumps(problem(404, "not_found")), "problem\\+json"),
    ("GET", "/jobs/42/apply", 302, HTML, b"<html>", "no body"),
    ("POST", "/jobs/42/apply", 400, PROBLEM, dumps(problem(400, "malformed_json")), "code"),
    ("GET", f"{V}/jobs/42", 200, None, dumps(JOB), "no Content-Type"),
    ("GET", f"{V}/jobs/42", 200, JSON, b"<html>", "not JSON"),
    ("GET", f"{V}/applications/7/resume", 200, "image/png", b"\x89PNG", "image/png"),
    (
        "GET",
        f"{V}/applications/7",
        200,
        JSON,
        dumps({**APPLICATION, "receivedAt": "2025-05-02T14:03:11+00:00"}),
        "receivedAt",
    ),
    # C10: timestamps carry milliseconds; a feed's next is never null.
    ("GET", f"{V}/jobs/42", 200, JSON, dumps(bad(updatedAt="2025-05-01T13:45:02Z")), "updatedAt"),
    (
        "GET",
        f"{V}/jobs?sort=updatedAt",
        200,
        JSON,
        dumps({"data": [], "paging": {**FEED_PAGING, "next": None}}),
        "paging",
    ),
]


@pytest.mark.parametrize(("method", "path", "status", "content_type", "body", "match"), BAD)
def test_the_checker_rejects(
    method: str, path: str, status: int, content_type: str | None, body: bytes, match: str
) -> None:
    with pytest.raises(AssertionError, match=match):
        check_response(method, path, status, content_type, body)


def test_literal_segments_win_over_templated_ones() -> None:
    templates = ["/a/{id}", "/a/{id}/b", "/a/new", "/{x}/new/b"]
    assert match_template("/a/new", templates) == "/a/new"
    assert match_template("/a/12?x=/a/new", templates) == "/a/{id}"
    assert match_template("/a/new/b", templates) == "/a/{id}/b"
    assert match_template("/a/12/", templates) == "/a/{id}"
    assert match_template("/z/new/b", templates) == "/{x}/new/b"
    assert match_template("/a", templates) is None
