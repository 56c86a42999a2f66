"""Checks one HTTP response against api/openapi.json (a test helper, not a test module).

`check_response` raises AssertionError when the path, the method, the status or the content type
is not documented, or when a JSON body does not validate against the documented schema. A method
a path does not document is allowed the 405 and 501 its operations document for the methods they
are not (C1), and, for OPTIONS, a CORS preflight answer without a body (C2). Pass the effective
method of a request sent with X-HTTP-Method-Override (C7).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DOC_PATH = Path(__file__).resolve().parents[1] / "api" / "openapi.json"
DOC_URI = "https://jobpost.test/api/v1.1/openapi.json"
NO_BODY_STATUSES = frozenset({204, 304})
ANY_CONTENT = ("*/*", "application/octet-stream")
OTHER_METHODS = frozenset({405, 501})  # a method a path lacks; one no one knows


def loaded(result: Any) -> Any:
    """The operation schemathesis loaded, or the error it met loading it, raised."""
    from schemathesis.core.result import Err

    if isinstance(result, Err):
        raise result.err()
    return result.ok()


@cache
def document() -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(DOC_PATH.read_text(encoding="utf-8"))
    return parsed


@cache
def _registry() -> Registry[Any]:
    resource = Resource.from_contents(document(), default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC_URI, resource)
    return registry


@cache
def _validator(pointer: str) -> Draft202012Validator:
    """A validator of the schema at `pointer` in the document, its $refs resolved there."""
    schema = {"$ref": f"{DOC_URI}#{quote(pointer, safe='/~')}"}
    return Draft202012Validator(
        schema, registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def schema_errors(pointer: str, instance: Any) -> list[str]:
    """Where and why `instance` breaks the schema at `pointer` in the document (none: valid)."""
    return [f"{e.json_path}: {e.message[:200]}" for e in _validator(pointer).iter_errors(instance)]


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _pointer(*segments: str) -> str:
    return "".join("/" + _escape(s) for s in segments)


def _resolve(pointer: str) -> Any:
    node: Any = document()
    for raw in pointer.split("/")[1:]:
        node = node[raw.replace("~1", "/").replace("~0", "~")]
    return node


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}/]+\})", template)
    body = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(body)


def _specificity(template: str) -> tuple[bool, ...]:
    """Sorts literal segments before templated ones, segment by segment."""
    return tuple("{" in segment for segment in template.split("/"))


@cache
def _compiled(templates: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    ordered = sorted(templates, key=lambda t: (_specificity(t), t))
    return [(t, _template_regex(t)) for t in ordered]


def match_template(path: str, templates: Iterable[str]) -> str | None:
    """The template matching the concrete `path` (query ignored), literal segments first; a
    trailing slash is ignored, as the app strips it."""
    concrete = urlsplit(path).path
    concrete = concrete.removesuffix("/") or "/"
    for template, regex in _compiled(tuple(templates)):
        if regex.fullmatch(concrete):
            return template
    return None


def _is_preflight(template: str, method: str, status: int, body: bytes) -> bool:
    """A CORS preflight (C2): OPTIONS on a documented path, answered without a body."""
    undocumented = "options" not in document()["paths"][template]
    return method.upper() == "OPTIONS" and undocumented and status in (200, 204) and not body


def _response_pointer(where: str, template: str, method: str, status: int) -> str:
    """The pointer of the documented response (its $ref followed)."""
    path_item = document()["paths"][template]
    if method.lower() not in path_item:
        documented = sorted(m.lower() for m in path_item if m != "parameters")
        if status not in OTHER_METHODS:
            raise AssertionError(f"{where}: method not documented (documented: {documented})")
        method = documented[0]  # every operation of a path documents the same 405 and 501
    responses = path_item[method.lower()]["responses"]
    key = next((k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None)
    if key is None:
        raise AssertionError(f"{where}: status not documented (documented: {sorted(responses)})")
    pointer = _pointer("paths", template, method.lower(), "responses", key)
    ref = responses[key].get("$ref")
    return pointer if ref is None else ref.removeprefix("#")


def _media_key(where: str, content: dict[str, Any], content_type: str | None) -> str:
    if content_type is None:
        raise AssertionError(f"{where}: no Content-Type, documented: {sorted(content)}")
    media = content_type.split(";", 1)[0].strip().lower()
    wildcard = media.split("/", 1)[0] + "/*"
    for key in (media, wildcard, *ANY_CONTENT):
        if key in content:
            return key
    raise AssertionError(f"{where}: Content-Type {media!r} not documented ({sorted(content)})")


def _is_json(media_key: str) -> bool:
    return media_key == "application/json" or media_key.endswith("+json")


def _validate_json(where: str, schema_pointer: str, body: bytes) -> None:
    try:
        instance = json.loads(body)
    except ValueError as exc:
        raise AssertionError(f"{where}: body is not JSON ({exc}): {body[:200]!r}") from None
    errors = list(_validator(schema_pointer).iter_errors(instance))
    if errors:
        error = best_match(errors)
        raise AssertionError(
            f"{where}: body breaks the schema {schema_pointer} at {error.json_path}: "
            f"{error.message[:300]} ({len(errors)} error(s)); body: {body[:300]!r}"
        )


def _check_body(
    where: str, pointer: str, status: int, content_type: str | None, body: bytes
) -> None:
    content: dict[str, Any] = _resolve(pointer).get("content", {})
    if status in NO_BODY_STATUSES or not content:
        if body:
            raise AssertionError(f"{where}: no body is documented, got {len(body)} bytes")
        return
    key = _media_key(where, content, content_type)
    if _is_json(key) and "schema" in content[key]:
        _validate_json(where, f"{pointer}{_pointer('content', key, 'schema')}", body)


def check_response(
    method: str, path: str, status: int, content_type: str | None, body: bytes
) -> None:
    """Raise AssertionError unless the response is one api/openapi.json documents."""
    where = f"{method.upper()} {path} -> {status}"
    template = match_template(path, document()["paths"])
    if template is None:
        raise AssertionError(f"{where}: path not documented")
    where = f"{where} [{template}]"
    if _is_preflight(template, method, status, body):
        return
    if method.upper() == "HEAD":  # GET's answer without its body (RFC 9110 section 9.3.2)
        assert body == b"", f"{where}: a body"
        _response_pointer(where, template, "GET", status)
        return
    pointer = _response_pointer(where, template, method, status)
    _check_body(where, pointer, status, content_type, body)
