"""api/openapi.json: a valid OpenAPI 3.1 document of every endpoint, and its response checker."""

from __future__ import annotations

import ast
import base64
import copy
import hashlib
import hmac
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import api
from api.responses import INT32_MAX
from models.applications.service import MAX_EMAIL
from models.webhooks.messages import EVENT_TYPES
from tests.openapi_check import (
    DOC_PATH,
    check_response,
    document,
    loaded,
    match_template,
    schema_errors,
)

V = "/api/v1.1"
PROBLEM = "application/problem+json"
JSON = "application/json"
HTML = "text/html"
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
    ("delete", f"{V}/applications/{{id}}"),
    ("get", f"{V}/applications/{{id}}/resume"),
    ("get", f"{V}/employer"),
    ("put", f"{V}/employer"),
    ("post", f"{V}/jobs/{{id}}/reports"),
    ("get", f"{V}/openapi.json"),
    ("post", f"{V}/webhooks"),
    ("get", f"{V}/webhooks"),
    ("get", f"{V}/webhooks/{{id}}"),
    ("put", f"{V}/webhooks/{{id}}"),
    ("delete", f"{V}/webhooks/{{id}}"),
    ("post", f"{V}/webhooks/{{id}}/secret"),
    ("post", f"{V}/webhooks/{{id}}/test"),
    ("get", f"{V}/webhooks/{{id}}/deliveries"),
    ("post", f"{V}/webhooks/{{id}}/deliveries/{{messageId}}/retry"),
    ("get", "/jobs/{id}"),
    ("get", "/jobs/{id}/apply"),
    ("post", "/jobs/{id}/apply"),
    ("get", "/jobs/{id}/applied"),
    ("get", "/jobs/{id}/report"),
    ("post", "/jobs/{id}/report"),
    ("get", "/jobs/{id}/reported"),
    ("get", "/policies/job-fraud"),
    ("get", "/policies/privacy"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("post", f"{V}/syncs"),
    ("get", f"{V}/syncs"),
    ("get", f"{V}/syncs/{{id}}"),
    ("post", f"{V}/syncs/{{id}}/jobs"),
    ("post", f"{V}/syncs/{{id}}/start"),
    ("post", f"{V}/syncs/{{id}}/cancel"),
    ("get", f"{V}/syncs/{{id}}/items"),
]

# What any request may meet, whatever its path and method: the HTTP server's refusals (400
# malformed_request, 403 forbidden, 414, 417, 431, 501 unsupported_transfer_coding:
# api.gunicorn_workers), a method the path lacks (405) or no one knows (501), a fault (500).
EVERYWHERE = {400, 403, 405, 414, 417, 431, 500, 501}
# Statuses per operation besides those, as C1 (and C3, C4, C8, C9) make them apply; 503 when
# the database does not answer (api.errors.database_unavailable).
STATUSES = {
    ("get", f"{V}/jobs"): {200, 400, 401, 500, 503},
    ("post", f"{V}/jobs"): {200, 201, 400, 401, 409, 413, 415, 422, 500, 503},
    ("put", f"{V}/jobs"): {200, 201, 400, 401, 409, 412, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs"): {204, 400, 401, 404, 412, 413, 415, 422, 500, 503},
    ("get", f"{V}/jobs/{{id}}"): {200, 304, 401, 404, 500, 503},
    ("put", f"{V}/jobs/{{id}}"): {200, 400, 401, 404, 409, 412, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs/{{id}}"): {204, 400, 401, 404, 412, 413, 415, 500, 503},
    ("post", f"{V}/jobs/{{id}}/applications"): {
        202,
        400,
        404,
        409,
        410,
        413,
        415,
        422,
        429,
        500,
        503,
    },
    ("get", f"{V}/jobs/{{id}}/applications"): {200, 400, 401, 404, 500, 503},
    ("get", f"{V}/applications"): {200, 400, 401, 500, 503},
    ("get", f"{V}/applications/{{id}}"): {200, 401, 404, 500, 503},
    ("get", f"{V}/applications/{{id}}/resume"): {200, 401, 404, 500, 503},
    ("get", f"{V}/employer"): {200, 401, 500, 503},
    ("post", f"{V}/jobs/{{id}}/reports"): {202, 400, 404, 410, 413, 415, 422, 429, 500, 503},
    ("put", f"{V}/employer"): {200, 400, 401, 413, 415, 422, 500, 503},
    ("get", f"{V}/positiontypes"): {200, 304, 500, 503},
    ("get", f"{V}/categories"): {200, 304, 500, 503},
    ("get", f"{V}/locations"): {200, 304, 400, 500, 503},
    ("get", f"{V}/locations/{{id}}"): {200, 304, 404, 500, 503},
    ("get", f"{V}/openapi.json"): {200, 304, 500},
    # C12, C14: action endpoints take no body, but one sent must be JSON (413, 415)
    ("post", f"{V}/webhooks"): {201, 400, 401, 413, 415, 422, 500, 503},
    ("get", f"{V}/webhooks"): {200, 400, 401, 500, 503},
    ("get", f"{V}/webhooks/{{id}}"): {200, 401, 404, 500, 503},
    ("put", f"{V}/webhooks/{{id}}"): {200, 400, 401, 404, 413, 415, 422, 500, 503},
    ("delete", f"{V}/webhooks/{{id}}"): {204, 400, 401, 404, 413, 415, 500, 503},
    ("post", f"{V}/webhooks/{{id}}/secret"): {200, 400, 401, 404, 413, 415, 500, 503},
    ("post", f"{V}/webhooks/{{id}}/test"): {202, 400, 401, 404, 409, 413, 415, 429, 500, 503},
    ("get", f"{V}/webhooks/{{id}}/deliveries"): {200, 400, 401, 404, 500, 503},
    ("post", f"{V}/webhooks/{{id}}/deliveries/{{messageId}}/retry"): {
        202,
        400,
        401,
        404,
        409,
        413,
        415,
        429,
        500,
        503,
    },
    ("get", "/jobs/{id}"): {200, 404, 410, 500, 503},
    ("get", "/jobs/{id}/apply"): {302, 404, 410, 500, 503},
    ("post", "/jobs/{id}/apply"): {303, 400, 404, 409, 410, 413, 415, 422, 429, 500, 503},
    ("get", "/jobs/{id}/applied"): {200, 404, 500, 503},
    ("get", "/jobs/{id}/report"): {200, 404, 410, 500, 503},  # C13
    ("post", "/jobs/{id}/report"): {303, 400, 404, 409, 410, 413, 415, 422, 429, 500, 503},
    ("get", "/jobs/{id}/reported"): {200, 404, 500, 503},
    ("get", "/policies/job-fraud"): {200, 500, 503},
    ("get", "/policies/privacy"): {200, 500, 503},
    ("get", "/healthz"): {200, 500},
    ("get", "/readyz"): {200, 500, 503},
    ("get", "/metrics"): {200, 500},
    # C11
    ("post", f"{V}/syncs"): {202, 400, 401, 409, 413, 415, 422, 500, 503},
    ("get", f"{V}/syncs"): {200, 400, 401, 500, 503},
    ("get", f"{V}/syncs/{{id}}"): {200, 401, 404, 500, 503},
    ("post", f"{V}/syncs/{{id}}/jobs"): {200, 400, 401, 404, 409, 413, 415, 422, 500, 503},
    ("post", f"{V}/syncs/{{id}}/start"): {202, 400, 401, 404, 409, 413, 415, 422, 500, 503},
    ("post", f"{V}/syncs/{{id}}/cancel"): {200, 400, 401, 404, 409, 413, 415, 500, 503},
    ("get", f"{V}/syncs/{{id}}/items"): {200, 400, 401, 404, 500, 503},
}

PUBLIC = {
    ("post", f"{V}/jobs/{{id}}/reports"),
    ("post", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/positiontypes"),
    ("get", f"{V}/categories"),
    ("get", f"{V}/locations"),
    ("get", f"{V}/locations/{{id}}"),
    ("get", f"{V}/openapi.json"),
    ("get", "/jobs/{id}"),
    ("get", "/jobs/{id}/apply"),
    ("post", "/jobs/{id}/apply"),
    ("get", "/jobs/{id}/applied"),
    ("get", "/jobs/{id}/report"),
    ("post", "/jobs/{id}/report"),
    ("get", "/jobs/{id}/reported"),
    ("get", "/policies/job-fraud"),
    ("get", "/policies/privacy"),
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
    "workplaceType": "onSite",
    "applicantLocations": [],
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
    "language": "en",
    "translation": {
        "title": "Comptable principal ou principale",
        "description": "<p>Joignez-vous à nous.</p>",
    },
    "updatedAt": "2025-05-01T13:45:02.118Z",
    "aiScreening": False,
    "existingVacancy": None,
    "takenDown": False,
}

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


def test_openapi_spec_validator_finds_nothing_wrong() -> None:
    """The OAI meta-schema checks the shape; openapi-spec-validator checks the rest, such as
    each path template's parameters and unique operationIds."""
    from openapi_spec_validator import validate

    validate(document())


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
    assert {int(s) for s in responses} == STATUSES[(method, path)] | EVERYWHERE


def test_security_is_the_api_key_except_on_public_operations() -> None:
    scheme = document()["components"]["securitySchemes"]["ApiKey"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "API-Key"}
    for method, path, operation in operations():
        expected = [] if (method, path) in PUBLIC else [KEYED]
        assert operation["security"] == expected, (method, path)


def test_every_error_is_a_problem() -> None:
    for method, path, operation in operations():
        for status, response in operation["responses"].items():
            if int(status) >= 400 and not path.startswith(PAGES):
                content = resolve(response["$ref"])["content"]
                assert list(content) == [PROBLEM], (method, path, status)


PAGES = ("/jobs/", "/policies/")  # the public pages (C8, C13)


# Answered by the HTTP server before the application: a problem on the pages too.
SERVER_ONLY = {403, 414, 417, 431}


def test_every_error_of_a_page_is_a_page_unless_the_http_server_answers_it() -> None:
    """C8: an applicant's browser shows a page, never a problem, for what the app answers."""
    for method, path, operation in operations():
        if not path.startswith(PAGES):
            continue
        for status, answer in operation["responses"].items():
            content = (resolve(answer["$ref"]) if "$ref" in answer else answer).get("content", {})
            if int(status) in SERVER_ONLY or (method, int(status)) == ("get", 400):
                assert list(content) == [PROBLEM], (method, path, status)
            elif int(status) >= 400:
                # The page first: a generated client reads the first type it knows.
                assert list(content) in ([HTML], [HTML, PROBLEM]), (method, path, status)


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
    found = document()["components"]["parameters"]
    params = [p for n, p in found.items() if p["in"] == "path" and n != "MessageId"]
    assert len(params) == 5  # jobs, applications, locations, webhooks, sync runs
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


# ---------------------------------------------------------------- the codes the service answers

CODE = re.compile(r"[a-z]+(_[a-z]+)*")


def _pair(status: ast.expr, code: ast.expr) -> tuple[int, str] | None:
    """(status, code) when both are literals that look like an error status and a C1 code."""
    if not (isinstance(status, ast.Constant) and isinstance(code, ast.Constant)):
        return None
    number, text = status.value, code.value
    if isinstance(number, int) and 400 <= number <= 599 and isinstance(text, str):
        return (number, text) if CODE.fullmatch(text) else None
    return None


def _problem_call(node: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """The status and code arguments of a `Problem(...)` call, or None for another call."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name != "Problem":
        return None
    named = {k.arg: k.value for k in node.keywords}
    positional = iter(node.args)
    return next(positional, None) or named["status"], next(positional, None) or named["code"]


def answered_in_source() -> set[tuple[int, str]]:
    """Every (status, code) the api package writes: each `Problem(status, code, ...)`, each
    tuple holding a status then a code (gunicorn's refusals), each {status: code} entry
    (falcon's own errors). A Problem whose code is not a literal must be a domain error's
    `code`, which `answered_by_domain_errors` collects."""
    pairs: set[tuple[int, str]] = set()
    for source in sorted(Path(api.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            found: list[tuple[int, str] | None] = []
            if isinstance(node, ast.Call) and (args := _problem_call(node)) is not None:
                found = [_pair(*args)]
                domain_code = isinstance(args[1], ast.Attribute) and args[1].attr == "code"
                assert found[0] or domain_code, (
                    f"{source.name}:{node.lineno}: a Problem whose status or code is not a "
                    "literal: teach this test where its code comes from"
                )
            elif isinstance(node, ast.Tuple):
                found = [_pair(a, b) for a, b in itertools.pairwise(node.elts)]
            elif isinstance(node, ast.Dict):
                entries = zip(node.keys, node.values, strict=True)
                found = [_pair(k, v) for k, v in entries if k is not None]
            pairs.update(p for p in found if p is not None)
    return pairs


def answered_by_domain_errors() -> set[tuple[int, str]]:
    """The status and code of each domain error the API maps (api.errors.handle_domain)."""
    import api.app  # noqa: F401  # every module the service runs, so every DomainError
    from api.errors import DOMAIN_STATUS
    from models.core.errors import DomainError

    pairs, kinds = set(), list(DomainError.__subclasses__())
    while kinds:
        kind = kinds.pop()
        kinds.extend(kind.__subclasses__())
        pairs.add((DOMAIN_STATUS.get(kind, 400), kind.code))
    return pairs


def documented_pairs() -> set[tuple[int, str]]:
    """(status, code) of each narrowed problem schema of the document."""
    pairs = set()
    for schema in document()["components"]["schemas"].values():
        for member in schema.get("allOf", []):
            props = member.get("properties", {})
            if "status" in props and "code" in props:
                pairs |= set(itertools.product(props["status"]["enum"], props["code"]["enum"]))
    return pairs


def test_the_source_scan_finds_each_kind_of_answer() -> None:
    """The scan below cannot pass by finding nothing: one code of each source is found."""
    found = answered_in_source()
    assert (501, "method_not_implemented") in found  # a Problem(...) call
    assert (414, "uri_too_long") in found and (400, "malformed_request") in found  # gunicorn's
    assert (405, "method_not_allowed") in found  # falcon's own errors
    assert (409, "apply_via_url") in answered_by_domain_errors()


def test_every_code_the_service_answers_is_documented_with_its_status() -> None:
    """C1: a client reads `code`. A code the service answers and the document does not name
    (six did: malformed_request, uri_too_long, headers_too_large, expectation_failed,
    unsupported_transfer_coding, forbidden) breaks a client that validates by it."""
    answered = answered_in_source() | answered_by_domain_errors()
    codes = document()["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    assert sorted({code for _, code in answered} - set(codes)) == []
    assert sorted(answered - documented_pairs()) == []


def test_the_document_names_no_code_the_service_never_answers() -> None:
    answered = answered_in_source() | answered_by_domain_errors()
    codes = document()["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    assert sorted(set(codes) - {code for _, code in answered}) == []
    assert sorted(documented_pairs() - answered) == []


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


# ---------------------------------------------------------------------------- the examples


def examples_of(media: dict[str, Any]) -> list[Any]:
    """The values of a media type's (or parameter's) `example` and `examples`."""
    found = [media["example"]] if "example" in media else []
    return found + [e["value"] for e in media.get("examples", {}).values()]


def main_answers(operation: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each 2xx answer that has a body: (status, its content)."""
    for status, answer in operation["responses"].items():
        content = (resolve(answer["$ref"]) if "$ref" in answer else answer).get("content")
        if status.startswith("2") and content:
            yield status, content


def test_every_json_request_body_has_an_example() -> None:
    missing = [
        (method, path)
        for method, path, operation in operations()
        if JSON in (content := operation.get("requestBody", {}).get("content", {}))
        and not examples_of(content[JSON])
    ]
    assert missing == []


def test_every_main_answer_with_a_body_has_an_example() -> None:
    """Each JSON 2xx answer has one; an answer of other types (a page, the metrics, the
    résumé in any of its types) has one in at least one of them."""
    missing = []
    for method, path, operation in operations():
        for status, content in main_answers(operation):
            json_ones = [m for m in content if m == JSON or m.endswith("+json")]
            if any(not examples_of(content[m]) for m in json_ones) or not any(
                examples_of(media) for media in content.values()
            ):
                missing.append((method, path, status))
    assert missing == []


def pointed(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """Each node of the document with its JSON pointer."""
    yield pointer, node
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else []
    )
    for key, child in items:
        yield from pointed(child, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}")


def test_every_example_validates_against_its_own_schema() -> None:
    """Media types and parameters, in paths, components and webhooks: a client generator
    or schemathesis (which sends the examples) must not be shown a value the schema refuses."""
    found, broken = 0, []
    for pointer, node in pointed(document()):
        if isinstance(node, dict) and "schema" in node and isinstance(node["schema"], dict):
            for value in examples_of(node):
                found += 1
                broken += [f"{pointer}: {e}" for e in schema_errors(f"{pointer}/schema", value)]
    assert found > len(ENDPOINTS)
    assert broken == []


def test_the_example_check_finds_a_wrong_value() -> None:
    job = "/paths/~1api~1v1.1~1jobs~1{id}/get/responses/200/content/application~1json/schema"
    assert schema_errors(job, JOB) == []
    assert schema_errors(job, {**JOB, "status": "open"}) != []


def emitted_in_source() -> set[str]:
    """The event types the models and the API pass as literals to emit, emit_batch and
    announce (job events); webhook.test goes by its constant."""
    senders, types = {"emit", "emit_batch", "announce"}, set()
    for folder in ("models", "api"):
        for source in sorted((DOC_PATH.parents[1] / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if (
                    func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                ) in senders:
                    literals = [a.value for a in node.args if isinstance(a, ast.Constant)]
                    types |= {t for t in literals if isinstance(t, str)}
    return types


def test_every_event_the_service_sends_has_a_webhooks_entry() -> None:
    """C12: each event is a `webhooks` entry, POSTed with its payload's schema."""
    emitted = emitted_in_source()
    assert {"application.received", "job.expiring", "sync.completed"} <= emitted
    hooks = document()["webhooks"]
    assert sorted(hooks) == sorted({*EVENT_TYPES, *emitted})
    for name, item in hooks.items():
        content = item["post"]["requestBody"]["content"]
        assert list(content) == [JSON], name
        [example] = examples_of(content[JSON])
        assert example["type"] == name


def test_each_event_has_the_standard_webhooks_headers_and_a_signature_that_verifies() -> None:
    """The example headers sign the example body with the secret of the createWebhook
    example (HMAC-SHA256 over `{id}.{timestamp}.{body}`, C12), as a receiver checks them."""
    created = document()["paths"][f"{V}/webhooks"]["post"]["responses"]["201"]
    [endpoint] = examples_of(created["content"][JSON])
    secret = base64.b64decode(endpoint["secret"].removeprefix("whsec_"))
    for name, item in document()["webhooks"].items():
        params = {p["name"]: p for p in item["post"]["parameters"] if p["in"] == "header"}
        assert list(params) == ["webhook-id", "webhook-timestamp", "webhook-signature"], name
        assert all(p["required"] for p in params.values())
        [body] = examples_of(item["post"]["requestBody"]["content"][JSON])
        sent = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        signed = (
            f"{params['webhook-id']['example']}.{params['webhook-timestamp']['example']}.{sent}"
        )
        mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
        assert params["webhook-signature"]["example"] == "v1," + base64.b64encode(mac).decode()


@pytest.mark.parametrize(
    ("data", "base", "extra"),
    [
        ("ApplicationReceivedData", "Application", "resumeUrl"),
        ("JobHeaderWithCloseDate", "JobHeader", "closeDate"),
    ],
)
def test_an_events_data_is_its_resource_and_one_member_more(
    data: str, base: str, extra: str
) -> None:
    """C12: application.received carries the application as its GET shows it, job.expired
    and job.expiring a list element; the copy may not drift from the resource."""
    schemas = document()["components"]["schemas"]
    copied, resource = schemas[data], schemas[base]
    assert copied["properties"] == {**resource["properties"], extra: copied["properties"][extra]}
    assert copied["required"] == [*resource["required"], extra]
    assert copied["additionalProperties"] is False
