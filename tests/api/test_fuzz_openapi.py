"""C1: no input yields a 500. Schemathesis generates requests from the OpenAPI document the app
serves (valid ones, and invalid ones that break the schema), sends them to the WSGI app
in-process with a valid API key, on SQLite and PostgreSQL (the `app` fixture: a rolled-back
transaction per test), and every answer must be below 500 and match the document."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from api.app import WsgiApp
from tests.factories import create_job
from tests.openapi_check import check_response, loaded

# The job, reference and sync run operations (the other paths belong to C8 and C9).
FUZZED = (
    "/api/v1.1/jobs",
    "/api/v1.1/jobs/{id}",
    "/api/v1.1/positiontypes",
    "/api/v1.1/categories",
    "/api/v1.1/locations",
    "/api/v1.1/locations/{id}",
    "/api/v1.1/syncs",
    "/api/v1.1/syncs/{id}",
    "/api/v1.1/syncs/{id}/jobs",
    "/api/v1.1/syncs/{id}/start",
    "/api/v1.1/syncs/{id}/cancel",
    "/api/v1.1/syncs/{id}/items",
)
EXAMPLES = 6  # per operation and generation mode: the whole module stays well under a minute


def _operations(app: WsgiApp) -> list[Any]:
    schema = schemathesis.openapi.from_wsgi("/api/v1.1/openapi.json", app)
    operations = [loaded(result) for result in schema.get_all_operations()]
    chosen = [op for op in operations if op.path in FUZZED]
    assert len(chosen) == 18  # 4 on /jobs, 3 on /jobs/{id}, 4 reference lists, 7 sync runs
    return chosen


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_generated_request_is_answered_with_a_server_error(
    app: WsgiApp, api: Any, employer: Any, mode: GenerationMode
) -> None:
    create_job(api, employer, referenceId="FUZZ")  # something for ids and referenceIds to hit
    strategies = [op.as_strategy(generation_mode=mode) for op in _operations(app)]
    failures: list[str] = []

    @settings(
        max_examples=EXAMPLES * len(strategies),
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies))
    def exercise(case: Any) -> None:
        headers = {**(case.headers or {}), "API-Key": employer.key}
        response = case.call(headers=headers)
        where = f"{case.method} {case.formatted_path} -> {response.status_code}"
        if response.status_code >= 500:
            failures.append(f"{where}: {response.content[:300]!r}\n{case.as_curl_command()}")
            return
        try:
            method = case.method
            override = headers.get("X-HTTP-Method-Override", "").strip().upper()
            if method == "POST" and override in ("PUT", "DELETE"):
                method = override
            if case.operation.path.endswith("{id}") and method == "POST":
                return  # an invalid override on a path without POST: not documented (C7)
            content_type = (response.headers.get("content-type") or [None])[0]
            check_response(
                method, case.formatted_path, response.status_code, content_type, response.content
            )
        except AssertionError as exc:
            failures.append(str(exc))

    exercise()
    assert not failures, "\n\n".join(failures[:5])
