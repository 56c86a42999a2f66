"""api/openapi.json's examples and webhooks: every request body and main answer has an example
that validates against its own schema, and every event the service sends is documented."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest

from models.webhooks.messages import EVENT_TYPES
from tests.openapi_check import (
    DOC_PATH,
    document,
    schema_errors,
)
from tests.openapi_samples import ENDPOINTS, JOB, JSON, V, operations, resolve

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
        ("JobHeaderWithChanges", "JobHeader", "changes"),
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
