"""C1 errors and C7 content: problem shape, 413, 415, 400 malformed_json, 405, 404 and the
order in which they outrank each other (405, 401, 413, 415, 429, 400, 404, 409, 422)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.factories import JOBS, create_job, entries, job_body, problem
from tests.openapi_check import document

JSON = {"Content-Type": "application/json"}
OVER_1_MIB = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'


def test_a_job_response_is_utf8_application_json(api: Any, employer: Any) -> None:
    """C7: JSON responses are UTF-8 application/json."""
    job = create_job(api, employer, title="Pâtissière à Montréal")
    result = api.get(f"{JOBS}/{job['id']}", key=employer.key)
    assert result.headers["content-type"] == "application/json"
    assert "Pâtissière".encode() in result.content


def test_an_error_is_a_problem_with_every_c1_member(api: Any, employer: Any) -> None:
    """C1: RFC 9457 shape with type, title, status, code and detail."""
    body = problem(api.get(f"{JOBS}/999999", key=employer.key), 404, "not_found")
    assert body["title"] == "Not Found" and body["detail"]
    assert "errors" not in body


def test_a_422_lists_every_broken_rule_not_only_the_first(api: Any, employer: Any) -> None:
    """C1: `errors` lists every violated rule, each with its own field and code."""
    body = job_body(title=" ", categories=[], description="<script>x</script>", salary=5)
    result = api.post(JOBS, json=body, key=employer.key)
    assert entries(result) == [
        ("title", "too_short"),
        ("categories", "too_few"),
        ("salary", "invalid_type"),
        ("description", "html_tag_not_allowed"),
    ]
    assert result.json["detail"] == "The job has 4 invalid fields."


# --- 413 payload_too_large -------------------------------------------------------------


def test_a_body_over_1_mib_is_413(api: Any, employer: Any) -> None:
    """C1: the request size limit is 1 MiB on job writes."""
    result = api.post(JOBS, body=OVER_1_MIB, headers=JSON, key=employer.key)
    assert problem(result, 413, "payload_too_large")["title"] == "Content Too Large"  # RFC 9110


def test_a_body_of_exactly_1_mib_is_read(api: Any, employer: Any) -> None:
    """C1: 1 MiB itself is allowed (the description has no length limit of its own, C4)."""
    raw = json.dumps(job_body(description="<p>x</p>")).encode()
    padded = raw.replace(b"<p>x</p>", b"<p>" + b"x" * (1024 * 1024 - len(raw) + 1) + b"</p>")
    assert len(padded) == 1024 * 1024
    assert api.post(JOBS, body=padded, headers=JSON, key=employer.key).status_code == 201


def test_a_chunked_body_over_1_mib_without_content_length_is_413(api: Any, employer: Any) -> None:
    """C1: also when sent chunked without a length (the WSGI server de-chunks it)."""
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    result = api.post(
        JOBS, body=OVER_1_MIB, headers=headers, key=employer.key, extras={"CONTENT_LENGTH": ""}
    )
    problem(result, 413, "payload_too_large")


def test_a_body_shorter_than_its_content_length_is_400_and_writes_nothing(
    api: Any, employer: Any
) -> None:
    """C1 400: a client that went away mid-body sent a body that may parse (here a whole JSON
    object, the rest of the upload lost); nothing of it is acted on."""
    body = json.dumps({**job_body(), "referenceId": "CUT-1"}).encode()
    result = api.put(
        JOBS,
        body=body,
        headers=JSON,
        key=employer.key,
        extras={"CONTENT_LENGTH": str(len(body) + 100)},
    )
    assert "ended early" in problem(result, 400, "malformed_json")["detail"]
    assert api.get(JOBS, key=employer.key).json["paging"]["total"] == 0


def test_a_small_chunked_body_is_read(api: Any, employer: Any) -> None:
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    result = api.post(
        JOBS,
        body=json.dumps(job_body()),
        headers=headers,
        key=employer.key,
        extras={"CONTENT_LENGTH": ""},
    )
    assert result.status_code == 201


def test_413_applies_to_put_and_to_delete_with_a_body(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    for method, path in (
        ("PUT", JOBS),
        ("PUT", f"{JOBS}/{job['id']}"),
        ("DELETE", JOBS),
        ("DELETE", f"{JOBS}/{job['id']}"),
    ):
        result = api.request(method, path, body=OVER_1_MIB, headers=JSON, key=employer.key)
        problem(result, 413, "payload_too_large")


# --- 415 unsupported_media_type --------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "application/jsonp",
        "application/json-patch+json",
    ],
)
def test_a_write_that_is_not_application_json_is_415(
    api: Any, employer: Any, content_type: str | None
) -> None:
    """C1: POST and PUT bodies must be application/json."""
    headers = {"Content-Type": content_type} if content_type else {}
    body = json.dumps(job_body())
    problem(
        api.post(JOBS, body=body, headers=headers, key=employer.key), 415, "unsupported_media_type"
    )
    problem(
        api.put(JOBS, body=body, headers=headers, key=employer.key), 415, "unsupported_media_type"
    )


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/json;charset=UTF-8", "Application/JSON"],
)
def test_application_json_with_parameters_or_any_case_is_accepted(
    api: Any, employer: Any, content_type: str
) -> None:
    """Interface: the Content-Type must start with application/json (a charset is allowed)."""
    result = api.post(
        JOBS, body=json.dumps(job_body()), key=employer.key, headers={"Content-Type": content_type}
    )
    assert result.status_code == 201


def test_a_delete_with_a_body_of_another_type_is_415(api: Any, employer: Any) -> None:
    """C1: a DELETE with a body must be JSON; without a body it needs no Content-Type."""
    job = create_job(api, employer, referenceId="R-1")
    result = api.delete(
        JOBS,
        body="referenceId=R-1",
        key=employer.key,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    problem(result, 415, "unsupported_media_type")
    assert api.delete(f"{JOBS}/{job['id']}", key=employer.key).status_code == 204


# --- 400 malformed_json ----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"title": "caf\xe9"}', id="invalid-utf8"),
        pytest.param(b"\xef\xbb\xbf\xef\xbb\xbf{}", id="two-utf8-boms"),
        pytest.param(b" \xef\xbb\xbf{}", id="utf8-bom-not-first"),
        pytest.param(b'{"title": ', id="truncated"),
        pytest.param(b"{'title': 'x'}", id="single-quotes"),
        pytest.param(b'{"title": "x",}', id="trailing-comma"),
        pytest.param(b'{"amount": NaN}', id="nan"),
        pytest.param(b'{"amount": Infinity}', id="infinity"),
        pytest.param(b"[]", id="array"),
        pytest.param(b'"a string"', id="string"),
        pytest.param(b"null", id="null"),
        pytest.param(b"42", id="number"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, id="deeply-nested-object"),
        pytest.param(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", id="deeply-nested-array"),
        pytest.param(b'{"title": "\\ud800 lone surrogate"}', id="lone-surrogate"),
        pytest.param(b'{"\\udc00": 1}', id="lone-surrogate-in-a-key"),
    ],
)
def test_a_body_that_is_not_a_utf8_json_object_is_400(api: Any, employer: Any, raw: bytes) -> None:
    """C1: malformed_json when the body is not valid UTF-8 JSON, or not a JSON object."""
    problem(api.post(JOBS, body=raw, headers=JSON, key=employer.key), 400, "malformed_json")


def test_a_body_may_begin_with_a_utf8_byte_order_mark(api: Any, employer: Any) -> None:
    """RFC 8259 section 8.1 lets a parser ignore it: a file a Windows editor saved, sent as it
    is, makes a job (and an application) like the same file without it."""
    raw = b"\xef\xbb\xbf" + json.dumps(job_body(title="Café cook", status="active")).encode()
    result = api.post(JOBS, body=raw, headers=JSON, key=employer.key)
    assert result.status_code == 201 and result.json["title"] == "Café cook"
    applicant = json.dumps({"name": "Ann", "email": "ann@example.com"}).encode()
    path = f"{JOBS}/{result.json['id']}/applications"
    assert api.post(path, body=b"\xef\xbb\xbf" + applicant, headers=JSON).status_code == 202


def test_a_surrogate_pair_escape_is_a_valid_character(api: Any, employer: Any) -> None:
    raw = json.dumps(job_body(title="Baker \U0001f35e")).encode()
    assert b"\\ud83c\\udf5e" in raw
    result = api.post(JOBS, body=raw, headers=JSON, key=employer.key)
    assert result.status_code == 201 and result.json["title"] == "Baker \U0001f35e"


# --- 404 and 405 -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw_id", ["abc", "1.0", "-1", "2147483648", "99999999999", "0x10", "%EF%BC%91", "1e3", " 1"]
)
def test_a_path_id_that_is_not_an_int32_is_404(api: Any, employer: Any, raw_id: str) -> None:
    """C4: a path id that is not an Int32 names nothing, so it is a 404 (never a 400 or 500)."""
    path = f"{JOBS}/{raw_id}"
    problem(api.get(path, key=employer.key), 404, "not_found")
    problem(api.put(path, json={"title": "x"}, key=employer.key), 404, "not_found")
    problem(api.delete(path, key=employer.key), 404, "not_found")


def _templated_operations() -> list[tuple[str, str]]:
    """Each operation of openapi.json whose path takes an id, with the method."""
    return [
        (method.upper(), path)
        for path, item in document()["paths"].items()
        if "{id}" in path
        for method in item
        if method != "parameters"
    ]


@pytest.mark.parametrize(("method", "template"), _templated_operations())
@pytest.mark.parametrize("raw_id", ["-1", "1.0", "abc", "2147483648"])
def test_each_path_that_takes_an_id_is_404_for_one_that_is_not_an_int32(
    api: Any, employer: Any, method: str, template: str, raw_id: str
) -> None:
    """C4: openapi.json types path ids as Int32 integers from 1, and a client that sends
    anything else still gets a 404, on every path that takes an id (read from the document,
    so a new one is asked too); the applicant's pages answer it with a page (C8)."""
    body: dict[str, Any] = {"json": {}} if method in ("POST", "PUT") else {}
    if template.startswith("/jobs/") and method == "POST":  # the form
        form = "multipart/form-data; boundary=b"
        part = b'--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nAnn\r\n--b--\r\n'
        body = {"body": part, "headers": {"Content-Type": form}}
    path = template.format(id=raw_id, messageId="msg_x")
    result = api.request(method, path, key=employer.key, **body)
    if template.startswith("/jobs/"):
        assert result.status_code == 404, result.text
        assert result.headers["content-type"] == "text/html; charset=utf-8"
    else:
        problem(result, 404, "not_found")


def test_an_unknown_job_id_is_404(api: Any, employer: Any) -> None:
    problem(api.get(f"{JOBS}/2147483647", key=employer.key), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", JOBS, {"GET", "POST", "PUT", "DELETE"}),
        ("PATCH", f"{JOBS}/1", {"GET", "PUT", "DELETE"}),
        ("POST", f"{JOBS}/1", {"GET", "PUT", "DELETE"}),
        ("DELETE", "/api/v1.1/positiontypes", {"GET"}),
        ("PUT", "/api/v1.1/locations/1", {"GET"}),
    ],
)
def test_a_method_the_resource_lacks_is_405_with_an_allow_header(
    api: Any, employer: Any, method: str, path: str, allowed: set[str]
) -> None:
    """C1: 405 method_not_allowed with an Allow header."""
    result = api.request(method, path, json={}, key=employer.key)
    problem(result, 405, "method_not_allowed")
    listed = {m.strip() for m in result.headers["allow"].split(",")} - {"OPTIONS"}
    assert listed == allowed | {"HEAD"}  # every resource here has a GET, hence a HEAD


@pytest.mark.parametrize(
    "path",
    [
        "/healthz",
        "/api/v1.1/positiontypes",
        "/api/v1.1/locations?q=van",
        JOBS,
        "/api/v1.1/openapi.json",
        "/jobs/{id}",
        "/jobs/{id}/apply",
        f"{JOBS}/{{id}}",
        f"{JOBS}/2147483647",
    ],
)
def test_head_answers_as_get_does_without_the_body(api: Any, employer: Any, path: str) -> None:
    """RFC 9110 section 9.1: a general-purpose server supports HEAD. Link checkers, crawlers
    and uptime probes ask the public pages so."""
    job = create_job(api, employer, status="active")
    path = path.replace("{id}", str(job["id"]))
    got, head = (api.request(m, path, key=employer.key) for m in ("GET", "HEAD"))
    assert head.status_code == got.status_code and head.content == b""
    for name in ("content-type", "etag", "cache-control"):
        assert head.headers.get(name) == got.headers.get(name), name
    assert head.headers["content-length"] == str(len(got.content))


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")  # falcon's test client checks
def test_a_method_no_one_knows_is_501(api: Any, employer: Any) -> None:
    """RFC 9110 section 9.1: a method the server does not know is 501 (a known one that the
    resource lacks is 405, above); falcon's own answer was 400 malformed_json."""
    problem(api.request("FOO", f"{JOBS}/1", key=employer.key), 501, "method_not_implemented")


# --- precedence: 405, 401, 413, 415, 429, 400, 404, 409, 422 ---------------------------


def test_405_beats_401(api: Any) -> None:
    problem(api.request("PATCH", JOBS, json={}), 405, "method_not_allowed")


def test_401_beats_413(api: Any) -> None:
    problem(api.post(JOBS, body=OVER_1_MIB, headers=JSON), 401, "unauthorized")


def test_401_beats_415(api: Any) -> None:
    problem(
        api.post(JOBS, body="title=x", headers={"Content-Type": "text/plain"}), 401, "unauthorized"
    )


def test_401_beats_400_invalid_query(api: Any) -> None:
    problem(api.get(JOBS, params={"pageSize": "0"}), 401, "unauthorized")


def test_413_beats_415(api: Any, employer: Any) -> None:
    result = api.post(
        JOBS, body=OVER_1_MIB, headers={"Content-Type": "text/plain"}, key=employer.key
    )
    problem(result, 413, "payload_too_large")


def test_415_beats_400(api: Any, employer: Any) -> None:
    result = api.post(
        JOBS, body=b"not json", headers={"Content-Type": "text/plain"}, key=employer.key
    )
    problem(result, 415, "unsupported_media_type")


def test_400_beats_404(api: Any, employer: Any) -> None:
    """A malformed body on an unknown job, or on a path id that is no Int32, is 400."""
    for path in (f"{JOBS}/999999", f"{JOBS}/abc"):
        result = api.put(path, body=b"{oops", headers=JSON, key=employer.key)
        problem(result, 400, "malformed_json")
    problem(
        api.delete(f"{JOBS}/999999", body=b"[", headers=JSON, key=employer.key),
        400,
        "malformed_json",
    )


def test_404_beats_409_and_422(api: Any, employer: Any) -> None:
    create_job(api, employer, referenceId="TAKEN")
    body = {"referenceId": "TAKEN", "title": "", "categories": []}
    problem(api.put(f"{JOBS}/999999", json=body, key=employer.key), 404, "not_found")


def test_409_beats_422(api: Any, employer: Any) -> None:
    """POST with a used referenceId and other broken rules is 409, before validation."""
    create_job(api, employer, referenceId="TAKEN")
    body = job_body(referenceId="TAKEN", title="", categories=[])
    problem(api.post(JOBS, json=body, key=employer.key), 409, "duplicate_reference_id")


def test_409_beats_422_on_a_rename_by_id(api: Any, employer: Any) -> None:
    create_job(api, employer, referenceId="TAKEN")
    job = create_job(api, employer, referenceId="MINE")
    body = {"referenceId": "TAKEN", "title": ""}
    result = api.put(f"{JOBS}/{job['id']}", json=body, key=employer.key)
    problem(result, 409, "duplicate_reference_id")
