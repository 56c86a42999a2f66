"""C7 method override: POST with X-HTTP-Method-Override PUT or DELETE (any case) is handled as
that method on the same path; any other value is 400 invalid_method_override; the header is
ignored on other methods."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, create_app
from models.core.settings import Settings
from tests.conftest import Api
from tests.factories import JOBS, create_job, job_body, problem, read_shape, unstamped


def override(value: str) -> dict[str, str]:
    return {"X-HTTP-Method-Override": value}


def post_unchecked(api: Any, path: str, key: str | None = None, **kwargs: Any) -> Any:
    """A POST the OpenAPI check cannot judge: openapi.json documents no POST on /jobs/{id}
    (an overridden POST is documented as the method it names), so an invalid override there
    has no documented answer; C7 says it is 400 invalid_method_override."""
    headers = dict(kwargs.pop("headers", {}))
    if key is not None:
        headers["API-Key"] = key
    return api.client.simulate_post(path, headers=headers, **kwargs)


@pytest.mark.parametrize("value", ["PUT", "put", " Put "])
def test_post_overridden_to_put_updates_a_job_by_id(api: Any, employer: Any, value: str) -> None:
    job = create_job(api, employer)
    result = api.post(
        f"{JOBS}/{job['id']}",
        json={"title": "Overridden"},
        key=employer.key,
        headers=override(value),
    )
    assert result.status_code == 200
    assert unstamped(read_shape(result.json)) == unstamped({**job, "title": "Overridden"})


def test_post_overridden_to_put_upserts_by_reference_id(api: Any, employer: Any) -> None:
    body = job_body(referenceId="OVR-1")
    created = api.post(JOBS, json=body, key=employer.key, headers=override("put"))
    assert created.status_code == 201 and created.headers["location"].endswith(
        f"{JOBS}/{created.json['id']}"
    )
    again = api.post(JOBS, json=body, key=employer.key, headers=override("PUT"))
    assert again.status_code == 200 and unstamped(again.json) == unstamped(created.json)


@pytest.mark.parametrize("value", ["DELETE", "delete"])
def test_post_overridden_to_delete_removes_a_job_by_id(api: Any, employer: Any, value: str) -> None:
    """C1: an overridden POST without a body needs no Content-Type."""
    job = create_job(api, employer)
    result = api.post(f"{JOBS}/{job['id']}", key=employer.key, headers=override(value))
    assert result.status_code == 204 and result.content == b""
    problem(api.get(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")


def test_post_overridden_to_delete_removes_a_job_by_reference_id(api: Any, employer: Any) -> None:
    job = create_job(api, employer, referenceId="OVR-DEL")
    result = api.post(
        JOBS, json={"referenceId": "OVR-DEL"}, key=employer.key, headers=override("Delete")
    )
    assert result.status_code == 204
    problem(api.get(f"{JOBS}/{job['id']}", key=employer.key), 404, "not_found")


@pytest.mark.parametrize("value", ["PATCH", "get", "POST", "", "PUT DELETE"])
@pytest.mark.parametrize("path", [JOBS, f"{JOBS}/1"])
def test_any_other_override_is_400(api: Any, employer: Any, value: str, path: str) -> None:
    create_job(api, employer)
    result = post_unchecked(
        api, path, json={"title": "x"}, key=employer.key, headers=override(value)
    )
    problem(result, 400, "invalid_method_override")


@pytest.mark.parametrize(
    "path", ["/api/v1.1/positiontypes", "/api/v1.1/locations/9", "/healthz", "/jobs/1/applied"]
)
def test_an_invalid_override_where_post_is_not_allowed_is_405(api: Any, path: str) -> None:
    """C1: 405 outranks 400, on resources that take neither POST nor PUT nor DELETE; on the
    applicant's pages (C8) as a page."""
    result = post_unchecked(api, path, json={}, headers=override("PATCH"))
    if path.startswith("/jobs/"):
        assert result.status_code == 405
        assert result.headers["content-type"] == "text/html; charset=utf-8"
    else:
        problem(result, 405, "method_not_allowed")
    assert "POST" not in result.headers["allow"] and "GET" in result.headers["allow"]


@pytest.mark.parametrize("path", [JOBS, f"{JOBS}/1"])
def test_a_post_overridden_to_put_without_a_body_is_malformed_not_415(
    api: Any, employer: Any, path: str
) -> None:
    """C1: an overridden POST without a body needs no Content-Type; a PUT needs a body."""
    create_job(api, employer)
    result = api.post(path, key=employer.key, headers=override("PUT"))
    problem(result, 400, "malformed_json")


def test_an_invalid_override_changes_nothing(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    post_unchecked(
        api, f"{JOBS}/{job['id']}", json={"title": "x"}, key=employer.key, headers=override("PATCH")
    )
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_an_invalid_override_without_a_key_is_401(api: Any) -> None:
    """C1: 401 outranks 400."""
    problem(api.post(JOBS, json={}, headers=override("PATCH")), 401, "unauthorized")
    problem(
        post_unchecked(api, f"{JOBS}/1", json={}, headers=override("PATCH")), 401, "unauthorized"
    )


def test_an_invalid_override_with_an_oversized_or_untyped_body_is_413_or_415(
    api: Any, employer: Any
) -> None:
    """C1: 413 and 415 outrank 400."""
    big = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
    headers = {**override("PATCH"), "Content-Type": "application/json"}
    problem(api.post(JOBS, body=big, headers=headers, key=employer.key), 413, "payload_too_large")
    problem(
        api.post(
            JOBS,
            body="x",
            headers={**override("PATCH"), "Content-Type": "text/plain"},
            key=employer.key,
        ),
        415,
        "unsupported_media_type",
    )


@pytest.mark.parametrize("form", [False, True], ids=["api", "form"])
def test_an_invalid_override_of_an_application_is_413_415_or_429_first(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    api: Any,
    employer: Any,
    form: bool,
) -> None:
    """C1: 413, 415 and 429 outrank 400 where no key is asked for too: the application
    endpoint and the form (C8), the form's answers being pages."""
    job = create_job(api, employer, status="active")
    path = f"/jobs/{job['id']}/apply" if form else f"{JOBS}/{job['id']}/applications"
    one = Collaborators(limiter=ratelimit.MemoryLimiter(1, 60))
    applying = Api(create_app(settings, sessions, one, today=clock))
    as_json = {**override("PATCH"), "Content-Type": "application/json"}
    answers = [
        post_unchecked(applying, path, body=b"x" * (10 * 1024 * 1024 + 1), headers=as_json),
        post_unchecked(applying, path, body="x", headers={**as_json, "Content-Type": "text/plain"}),
        post_unchecked(applying, path, json={}, headers=override("PATCH")),  # the one allowed
        post_unchecked(applying, path, json={}, headers=override("PATCH")),
    ]
    assert [a.status_code for a in answers] == [413, 415, 400, 429]
    if not form:
        codes = ["payload_too_large", "unsupported_media_type", "invalid_method_override"]
        for answer, code in zip(answers, [*codes, "rate_limited"], strict=True):
            problem(answer, answer.status_code, code)


@pytest.mark.parametrize("value", ["DELETE", "PUT", "PATCH"])
def test_the_header_is_ignored_on_get(api: Any, employer: Any, value: str) -> None:
    job = create_job(api, employer)
    result = api.get(f"{JOBS}/{job['id']}", key=employer.key, headers=override(value))
    assert result.status_code == 200 and result.json == job
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).status_code == 200


def test_the_header_is_ignored_on_put_and_delete(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    result = api.put(
        f"{JOBS}/{job['id']}", json={"title": "Put"}, key=employer.key, headers=override("DELETE")
    )
    assert result.status_code == 200 and result.json["title"] == "Put"
    deleted = api.delete(f"{JOBS}/{job['id']}", key=employer.key, headers=override("PATCH"))
    assert deleted.status_code == 204
