"""api/openapi.json: a valid OpenAPI 3.1 document of every endpoint, with the statuses each may
answer, and every code the service answers documented with its status."""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

import api
from api.responses import INT32_MAX
from models.applications.service import MAX_EMAIL
from tests.openapi_check import (
    DOC_PATH,
    document,
    loaded,
)
from tests.openapi_samples import (
    ENDPOINTS,
    HTML,
    KEYED,
    PROBLEM,
    V,
    operations,
    resolve,
    walk,
)

# What any request may meet, whatever its path and method: the HTTP server's refusals (400
# malformed_request, 403 forbidden, 414, 417, 431, 501 unsupported_transfer_coding:
# api.gunicorn_workers), a method the path lacks (405) or no one knows (501), a fault (500).
EVERYWHERE = {400, 403, 405, 414, 417, 431, 500, 501}
# Statuses per operation besides those, as C1 (and C3, C4, C8, C9) make them apply; 503 when
# the database does not answer (api.errors.database_unavailable).
STATUSES = {
    ("get", f"{V}/jobs"): {200, 400, 401, 429, 500, 503},
    ("post", f"{V}/jobs"): {200, 201, 400, 401, 429, 409, 413, 415, 422, 500, 503},
    ("put", f"{V}/jobs"): {200, 201, 400, 401, 429, 409, 412, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs"): {204, 400, 401, 429, 404, 412, 413, 415, 422, 500, 503},
    ("get", f"{V}/jobs/{{id}}"): {200, 304, 401, 429, 404, 500, 503},
    ("get", f"{V}/jobs/digest"): {200, 400, 401, 429, 500, 503},
    ("put", f"{V}/jobs/{{id}}"): {200, 400, 401, 429, 404, 409, 412, 413, 415, 422, 500, 503},
    ("delete", f"{V}/jobs/{{id}}"): {204, 400, 401, 429, 404, 412, 413, 415, 500, 503},
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
    ("get", f"{V}/jobs/{{id}}/applications"): {200, 400, 401, 429, 404, 500, 503},
    ("get", f"{V}/applications"): {200, 400, 401, 429, 500, 503},
    ("get", f"{V}/applications/{{id}}"): {200, 401, 429, 404, 500, 503},
    ("get", f"{V}/applications/{{id}}/resume"): {200, 401, 429, 404, 500, 503},
    ("get", f"{V}/employer"): {200, 401, 429, 500, 503},
    ("post", f"{V}/jobs/{{id}}/reports"): {202, 400, 404, 410, 413, 415, 422, 429, 500, 503},
    ("put", f"{V}/employer"): {200, 400, 401, 429, 413, 415, 422, 500, 503},
    ("get", f"{V}/positiontypes"): {200, 304, 500, 503},
    ("get", f"{V}/categories"): {200, 304, 500, 503},
    ("get", f"{V}/locations"): {200, 304, 400, 500, 503},
    ("get", f"{V}/locations/{{id}}"): {200, 304, 404, 500, 503},
    ("get", f"{V}/openapi.json"): {200, 304, 500},
    # C12, C14: action endpoints take no body, but one sent must be JSON (413, 415)
    ("post", f"{V}/webhooks"): {201, 400, 401, 429, 413, 415, 422, 500, 503},
    ("get", f"{V}/webhooks"): {200, 400, 401, 429, 500, 503},
    ("get", f"{V}/webhooks/{{id}}"): {200, 401, 429, 404, 500, 503},
    ("put", f"{V}/webhooks/{{id}}"): {200, 400, 401, 429, 404, 413, 415, 422, 500, 503},
    ("delete", f"{V}/webhooks/{{id}}"): {204, 400, 401, 429, 404, 413, 415, 500, 503},
    ("post", f"{V}/webhooks/{{id}}/secret"): {200, 400, 401, 429, 404, 413, 415, 500, 503},
    ("post", f"{V}/webhooks/{{id}}/test"): {202, 400, 401, 404, 409, 413, 415, 429, 500, 503},
    ("get", f"{V}/webhooks/{{id}}/deliveries"): {200, 400, 401, 429, 404, 500, 503},
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
    ("delete", f"{V}/employer/flagged-addresses/{{address}}"): {
        204,
        400,
        401,
        404,
        413,
        415,
        429,
        500,
        503,
    },
    # C23
    ("get", f"{V}/keys"): {200, 401, 429, 500, 503},
    ("post", f"{V}/keys"): {201, 400, 401, 429, 413, 415, 422, 500, 503},
    ("get", f"{V}/keys/{{id}}"): {200, 401, 429, 404, 500, 503},
    ("delete", f"{V}/keys/{{id}}"): {204, 400, 401, 429, 404, 413, 415, 500, 503},
    ("post", f"{V}/keys/{{id}}/rotate"): {201, 400, 401, 429, 404, 413, 415, 422, 500, 503},
    # C11
    ("post", f"{V}/syncs"): {202, 400, 401, 429, 409, 413, 415, 422, 500, 503},
    ("get", f"{V}/syncs"): {200, 400, 401, 429, 500, 503},
    ("get", f"{V}/syncs/{{id}}"): {200, 401, 429, 404, 500, 503},
    ("post", f"{V}/syncs/{{id}}/jobs"): {200, 400, 401, 429, 404, 409, 413, 415, 422, 500, 503},
    ("post", f"{V}/syncs/{{id}}/start"): {202, 400, 401, 429, 404, 409, 413, 415, 422, 500, 503},
    ("post", f"{V}/syncs/{{id}}/cancel"): {200, 400, 401, 429, 404, 409, 413, 415, 500, 503},
    ("get", f"{V}/syncs/{{id}}/items"): {200, 400, 401, 429, 404, 500, 503},
    # C17
    ("get", "/"): {200, 400, 500, 503},
    ("get", "/jobs"): {200, 400, 500, 503},
    # C15
    ("get", "/robots.txt"): {200, 304, 500},
    ("get", "/sitemap.xml"): {200, 304, 500, 503},
    ("get", "/sitemaps/jobs-{n}.xml"): {200, 304, 404, 500, 503},
    ("get", "/feeds/jobs.json"): {200, 304, 400, 500, 503},
    ("get", "/feeds/jobs.atom"): {200, 304, 400, 500, 503},
    ("get", "/feeds/indeed.xml"): {200, 304, 500, 503},
    # C19
    ("get", "/alerts/new"): {200, 400, 500, 503},
    ("post", "/alerts/new"): {303, 400, 413, 422, 429, 500, 503},
    ("get", "/alerts/sent"): {200, 500, 503},
    ("get", "/alerts/confirm/{token}"): {200, 500, 503},
    ("post", "/alerts/confirm/{token}"): {303, 404, 500, 503},
    ("get", "/alerts/manage/{token}"): {200, 404, 500, 503},
    ("post", "/alerts/manage/{token}"): {303, 400, 404, 413, 422, 500, 503},
    ("get", "/alerts/unsubscribe/{token}"): {200, 404, 500, 503},
    ("post", "/alerts/unsubscribe/{token}"): {200, 404, 500, 503},
    ("get", "/applications/status/{token}"): {200, 404, 500, 503},
    ("post", "/applications/status/{token}/erase"): {200, 303, 404, 500, 503},
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
    ("get", "/"),
    ("get", "/jobs"),
    ("get", "/robots.txt"),
    ("get", "/sitemap.xml"),
    ("get", "/sitemaps/jobs-{n}.xml"),
    ("get", "/feeds/jobs.json"),
    ("get", "/feeds/jobs.atom"),
    ("get", "/feeds/indeed.xml"),
    ("get", "/alerts/new"),
    ("post", "/alerts/new"),
    ("get", "/alerts/sent"),
    ("get", "/alerts/confirm/{token}"),
    ("post", "/alerts/confirm/{token}"),
    ("get", "/alerts/manage/{token}"),
    ("post", "/alerts/manage/{token}"),
    ("get", "/alerts/unsubscribe/{token}"),
    ("post", "/alerts/unsubscribe/{token}"),
    ("get", "/applications/status/{token}"),
    ("post", "/applications/status/{token}/erase"),
}


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
            if int(status) >= 400 and not is_page(path):
                content = resolve(response["$ref"])["content"]
                assert list(content) == [PROBLEM], (method, path, status)


PAGES = (
    "/jobs/",
    "/policies/",
    "/alerts/",
    "/applications/",
)  # the public pages (C8, C13, C19, C20)
SEARCH_PAGES = ("/", "/jobs")  # the search page (C17), at these paths exactly


def is_page(path: str) -> bool:
    return path.startswith(PAGES) or path in SEARCH_PAGES


# Answered by the HTTP server before the application: a problem on the pages too.
SERVER_ONLY = {403, 414, 417, 431}
# The pages whose GET reads its query, so that the app too answers a 400: a page (C19).
READ_QUERY = {"/alerts/new"}


def test_every_error_of_a_page_is_a_page_unless_the_http_server_answers_it() -> None:
    """C8: an applicant's browser shows a page, never a problem, for what the app answers."""
    for method, path, operation in operations():
        if not is_page(path):
            continue
        for status, answer in operation["responses"].items():
            content = (resolve(answer["$ref"]) if "$ref" in answer else answer).get("content", {})
            server_400 = (method, int(status)) == ("get", 400) and path not in READ_QUERY
            if path in SEARCH_PAGES and int(status) == 400:  # a filter no search means (C17)
                assert list(content) == [HTML, PROBLEM], (method, path, status)
            elif int(status) in SERVER_ONLY or server_400:
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
    assert len(params) == 6  # jobs, applications, locations, webhooks, sync runs, keys
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
