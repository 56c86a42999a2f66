"""api/openapi.json: a valid OpenAPI 3.1 document of every endpoint, and its response checker."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from api.responses import INT32_MAX
from models.applications import MAX_EMAIL
from tests.openapi_check import DOC_PATH, check_response, document, loaded, match_template

V = "/api/v1.1"
PROBLEM = "application/problem+json"
JSON = "application/json"
KEYED: dict[str, list[str]] = {"ApiKey": []}

# The eight job operations of the v1.1 interface, then C3, C8 and C9 (docs/reference.md).
ENDPOINTS = [
    ("get", f"{V}/jobs/{{id}}"),
    ("post", f"{V}/jobs"),
    ("put", f"{V}/jobs/{{id}}"),
    ("put", f"{V}/jobs"),
    ("delete", f"{V}/jobs/{{id}}"),
    ("delete", f"{V}/jobs"),
    ("get", f"{V}/jobs"),
    ("get", f"{V}/positiontypes"),
    ("get", f"{V}/categories"),
    ("get", f"{V}/locations"),
    ("get", f"{V}/locations/{{id}}"),
    ("post", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/applications"),
    ("get", f"{V}/applications/{{id}}"),
    ("get", f"{V}/applications/{{id}}/resume"),
    ("get", f"{V}/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
]

# Statuses per operation, as C1 (and C3, C4, C8, C9) make them apply; 503 when the database
# does not answer (api.errors.database_unavailable).
STATUSES = {
    ("get", f"{V}/jobs"): {200, 400, 401, 500, 503},
    ("post", f"{V}/jobs"): {201, 400, 401, 409, 413, 415, 422, 500, 503},
    ("put", f"{V}/jobs"): {200, 201, 400, 401, 409, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs"): {204, 400, 401, 404, 413, 415, 422, 500, 503},
    ("get", f"{V}/jobs/{{id}}"): {200, 304, 401, 404, 500, 503},
    ("put", f"{V}/jobs/{{id}}"): {200, 400, 401, 404, 409, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs/{{id}}"): {204, 400, 401, 404, 413, 415, 500, 503},
    ("post", f"{V}/jobs/{{id}}/applications"): {202, 400, 404, 409, 413, 415, 422, 429, 500, 503},
    ("get", f"{V}/jobs/{{id}}/applications"): {200, 400, 401, 404, 500, 503},
    ("get", f"{V}/applications"): {200, 400, 401, 500, 503},
    ("get", f"{V}/applications/{{id}}"): {200, 401, 404, 500, 503},
    ("get", f"{V}/applications/{{id}}/resume"): {200, 401, 404, 500, 503},
    ("get", f"{V}/positiontypes"): {200, 304, 500, 503},
    ("get", f"{V}/categories"): {200, 304, 500, 503},
    ("get", f"{V}/locations"): {200, 304, 400, 500, 503},
    ("get", f"{V}/locations/{{id}}"): {200, 304, 404, 500, 503},
    ("get", f"{V}/openapi.json"): {200, 304, 500},
    ("get", "/healthz"): {200, 500},
    ("get", "/readyz"): {200, 500, 503},
    ("get", "/metrics"): {200, 500},
}

PUBLIC = {
    ("post", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/positiontypes"),
    ("get", f"{V}/categories"),
    ("get", f"{V}/locations"),
    ("get", f"{V}/locations/{{id}}"),
    ("get", f"{V}/openapi.json"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
}

JOB: dict[str, Any] = {
    "id": 42,
    "referenceId": "REQ-2024-17",
    "employer": {"id": 1, "name": "Érable Comptabilité inc."},
    "title": "Senior accountant",
    "publishDate": "2025-05-01",
    "closeDate": "2025-06-30",
    "confidential": False,
    "autoRefresh": False,
    "status": "active",
    "locations": [
        {
            "id": 6167865,
            "name": "Toronto",
            "description": "Toronto, ON",
            "type": "City",
            "latitude": 43.70011,
            "longitude": -79.4163,
        },
        {
            "id": 9,
            "name": "Ontario",
            "description": "Ontario",
            "type": "Province",
            "latitude": None,
            "longitude": None,
        },
    ],
    "categories": [{"id": 1, "name": "Accounting & Finance"}, {"id": 23, "name": "Sales"}],
    "positionType": {"id": 1, "name": "Full Time"},
    "salary": {
        "amount": 60000,
        "maxAmount": 70000.5,
        "period": {"id": 1, "name": "Yearly", "unit": "year"},
        "plusCommission": True,
    },
    "description": '<p>Join <strong>us</strong>. <a href="https://example.com">More</a></p>',
    "applicantRoutingType": {"id": 1, "name": "Email"},
    "applicationEmail": "jobs@erable.test",
    "applicationUrl": None,
}

URL_JOB = {
    **JOB,
    "referenceId": None,
    "salary": None,
    "applicantRoutingType": {"id": 2, "name": "URL"},
    "applicationEmail": None,
    "applicationUrl": "https://careers.example.com/apply/42",
}

HEADER_KEYS = ["id", "referenceId", "employer", "title", "publishDate", "locations", "confidential"]
HEADER = {k: JOB[k] for k in [*HEADER_KEYS, "status"]}

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


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document()["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield method, path, operation


def walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        yield from walk(child)


def resolve(ref: str) -> Any:
    node: Any = document()
    for raw in ref.removeprefix("#/").split("/"):
        node = node[raw.replace("~1", "/").replace("~0", "~")]
    return node


# ------------------------------------------------------------------------------ the document


def test_the_document_is_valid_openapi_3_1() -> None:
    # The OAI meta-schema of 3.1, as schemathesis ships it.
    from schemathesis.specs.openapi.definitions import OPENAPI_31

    doc = document()
    errors = [e.message for e in Draft202012Validator(OPENAPI_31).iter_errors(doc)]
    assert errors == []
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] == "jobpost employer API"
    assert doc["info"]["version"] == "1.1"
    assert doc["servers"] == [{"url": "/"}]


def test_every_schema_is_a_valid_2020_12_schema() -> None:
    schemas = list(document()["components"]["schemas"].values())
    schemas += [n["schema"] for n in walk(document()) if isinstance(n, dict) and "schema" in n]
    for schema in schemas:
        Draft202012Validator.check_schema(schema)


def test_every_ref_resolves() -> None:
    refs = [n["$ref"] for n in walk(document()) if isinstance(n, dict) and "$ref" in n]
    assert refs
    for ref in refs:
        assert resolve(ref) is not None, ref


def test_schemathesis_loads_every_operation() -> None:
    import schemathesis

    schema = schemathesis.openapi.from_dict(document())
    operations = [loaded(result) for result in schema.get_all_operations()]
    assert {(o.method.lower(), o.path) for o in operations} == set(ENDPOINTS)


def test_the_file_is_written_with_indent_1() -> None:
    text = DOC_PATH.read_text(encoding="utf-8")
    assert text == json.dumps(document(), indent=1, ensure_ascii=False) + "\n"


def test_api_openapi_serves_the_same_document() -> None:
    from api.openapi import document as served

    assert served() == document()
    assert served() is served()


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_is_documented(method: str, path: str) -> None:
    assert method in document()["paths"][path]


def test_no_other_operation_is_documented() -> None:
    assert {(m, p) for m, p, _ in operations()} == set(ENDPOINTS)


@pytest.mark.parametrize(("method", "path"), sorted(STATUSES))
def test_statuses_of_each_operation(method: str, path: str) -> None:
    responses = document()["paths"][path][method]["responses"]
    assert {int(s) for s in responses} == STATUSES[(method, path)]


def test_security_is_the_api_key_except_on_public_operations() -> None:
    scheme = document()["components"]["securitySchemes"]["ApiKey"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "API-Key"}
    for method, path, operation in operations():
        expected = [] if (method, path) in PUBLIC else [KEYED]
        assert operation["security"] == expected, (method, path)


def test_every_error_is_a_problem() -> None:
    for method, path, operation in operations():
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                content = resolve(response["$ref"])["content"]
                assert list(content) == [PROBLEM], (method, path, status)


@pytest.mark.parametrize("schema", ["ApplicationCreate", "ApplicationForm", "Application"])
def test_the_applicants_email_has_the_services_limit(schema: str) -> None:
    # C8: a client validating by the document must not send what the service refuses.
    email = document()["components"]["schemas"][schema]["properties"]["email"]
    assert email["maxLength"] == MAX_EMAIL


def test_each_kind_of_problem_is_a_named_schema() -> None:
    """openapi-python-client makes a model of each named schema, and one per operation and
    status of a schema written in a response: 315 files of models when each problem was
    narrowed in its response, 90 with named ones."""
    for method, path, operation in operations():
        for status, answer in operation["responses"].items():
            content = (resolve(answer["$ref"]) if "$ref" in answer else answer).get("content", {})
            if PROBLEM in content:
                schema = content[PROBLEM]["schema"]
                assert list(schema) == ["$ref"], (method, path, status)
                assert schema["$ref"].startswith("#/components/schemas/"), (method, path, status)


def test_an_all_of_narrows_a_referenced_schema_without_const_or_a_new_type() -> None:
    """Client generators merge the members of an allOf property by property, and cannot merge
    a base's `type` with a `const` or with another `type`: openapi-python-client dropped every
    error response (`"status": {"const": 404}` over Problem's integer) and the whole upsertJob
    operation (JobUpsert's string referenceId over JobWrite's string or null). A one-value
    `enum`, `not` and keywords such as minLength narrow the same way and merge."""
    for node in walk(document()):
        if not (isinstance(node, dict) and isinstance(node.get("allOf"), list)):
            continue
        for member in node["allOf"]:
            for name, prop in member.get("properties", {}).items():
                if "$ref" in member or not isinstance(prop, dict):
                    continue
                assert "const" not in prop and "type" not in prop, (name, prop)


def test_path_ids_are_int32_integers_from_1() -> None:
    """A generated client takes `id: int` (openapi-python-client took `id: str` when the path
    ids were strings). A path segment that is not one is a 404 all the same (C4):
    tests/api/test_errors_and_bodies.py asks each templated path."""
    params = [p for p in document()["components"]["parameters"].values() if p["in"] == "path"]
    assert len(params) == 3
    for param in params:
        schema = {"type": "integer", "format": "int32", "minimum": 1, "maximum": INT32_MAX}
        assert param["schema"] == schema


def test_write_schemas_ignore_unknown_properties_and_read_schemas_do_not() -> None:
    schemas = document()["components"]["schemas"]
    assert schemas["JobWrite"]["additionalProperties"] is True
    assert "required" not in schemas["JobWrite"]
    for name in ("Job", "JobHeader", "Location", "Paging", "Application", "Problem"):
        assert schemas[name]["additionalProperties"] is False, name
    assert set(schemas["Job"]["required"]) == set(schemas["Job"]["properties"])


# ---------------------------------------------------------------------------- the checker


GOOD = [
    ("GET", f"{V}/jobs/42", 200, JSON, JOB),
    ("GET", f"{V}/jobs/42", 200, "application/json; charset=utf-8", URL_JOB),
    ("POST", f"{V}/jobs", 201, JSON, JOB),
    ("PUT", f"{V}/jobs", 201, JSON, URL_JOB),
    ("PUT", f"{V}/jobs/42", 200, JSON, JOB),
    ("GET", f"{V}/jobs?status=active&page=2", 200, JSON, {"data": [HEADER], "paging": PAGING}),
    ("GET", f"{V}/jobs?page=9", 200, JSON, {"data": [], "paging": {**PAGING, "next": None}}),
    ("POST", f"{V}/jobs", 422, PROBLEM, INVALID),
    ("POST", f"{V}/jobs", 409, PROBLEM, problem(409, "duplicate_reference_id")),
    ("GET", f"{V}/jobs/abc", 404, PROBLEM, problem(404, "not_found")),
    ("GET", f"{V}/jobs", 401, PROBLEM, problem(401, "unauthorized")),
    ("PATCH", f"{V}/jobs/42", 405, PROBLEM, problem(405, "method_not_allowed")),
    ("POST", f"{V}/jobs/42/applications", 202, JSON, {"id": 3, "status": "received"}),
    ("POST", f"{V}/jobs/42/applications", 409, PROBLEM, problem(409, "apply_via_url")),
    ("GET", f"{V}/applications?jobId=42", 200, JSON, {"data": [APPLICATION], "paging": PAGING}),
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
    ("DELETE", f"{V}/jobs/42", 204, JSON, b"{}", "no body"),
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
    assert match_template("/z/new/b", templates) == "/{x}/new/b"
    assert match_template("/a", templates) is None
