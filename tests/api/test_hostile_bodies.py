"""Bodies built to break a later step answer in the C1 shape, never 500 (C1, C10, C11): JSON
nested deeper than MAX_DEPTH, with or without an Idempotency-Key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.body import MAX_DEPTH
from models.entities import IdempotencyKey, SyncItem
from tests.factories import JOBS, create_job, job_body, problem

SYNCS = "/api/v1.1/syncs"
JSON = {"Content-Type": "application/json"}
KEYED = {**JSON, "Idempotency-Key": "deep-1"}


def nested(levels: int) -> str:
    """A value of `levels` nested arrays, the innermost empty."""
    return "[" * levels + "]" * levels


def too_deep(result: Any) -> None:
    body = problem(result, 400, "malformed_json")
    assert f"more than {MAX_DEPTH} levels" in body["detail"], body


def job_with(extra: str) -> bytes:
    """A valid job body with an unknown member `extra` (ignored, C4) holding nested arrays."""
    text = json.dumps(job_body(title="Deep cook"))
    return (text[:-1] + ', "extra": ' + extra + "}").encode()


@pytest.mark.parametrize("levels", [MAX_DEPTH, 260, 900, 5000])
def test_a_job_nested_too_deep_is_400_with_or_without_a_key(
    api: Any, employer: Any, session: Session, levels: int
) -> None:
    body = job_with(nested(levels - 1))  # the body itself is the outermost level
    for headers in (JSON, KEYED):
        result = api.post(JOBS, body=body, headers=headers, key=employer.key)
        if levels <= MAX_DEPTH:
            assert result.status_code == 201, result.text
            api.delete(f"{JOBS}/{result.json['id']}", key=employer.key)
        else:
            too_deep(result)
    if levels > MAX_DEPTH:
        assert session.scalars(select(IdempotencyKey)).all() == []  # no key was kept


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 900])
def test_an_application_nested_too_deep_is_400_with_or_without_a_key(
    api: Any, employer: Any, session: Session, levels: int
) -> None:
    job = create_job(api, employer, status="active")
    path = f"{JOBS}/{job['id']}/applications"
    body = '{"name": "Ann", "email": "ann@example.org", "extra": ' + nested(levels - 1) + "}"
    for headers in (JSON, KEYED):
        too_deep(api.post(path, body=body.encode(), headers=headers))
    assert session.scalars(select(IdempotencyKey)).all() == []


def sync_body(levels: int) -> bytes:
    """A sync run whose one item holds arrays reaching `levels` levels from the body's top:
    the body, `jobs` and the item are three."""
    return (
        '{"mode": "upsert", "jobs": [{"referenceId": "D-1", "extra": ' + nested(levels - 3) + "}]}"
    ).encode()


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 260, 900])
def test_a_sync_item_nested_too_deep_is_400_with_or_without_a_key(
    api: Any, employer: Any, session: Session, levels: int
) -> None:
    for headers in (JSON, KEYED):
        too_deep(api.post(SYNCS, body=sync_body(levels), headers=headers, key=employer.key))
    assert session.scalars(select(SyncItem)).all() == []


def test_a_sync_item_at_the_depth_limit_is_stored_whole(
    api: Any, employer: Any, session: Session
) -> None:
    result = api.post(SYNCS, body=sync_body(MAX_DEPTH), headers=KEYED, key=employer.key)
    assert result.status_code == 202, result.text
    stored = session.scalars(select(SyncItem.body).where(SyncItem.run_id == result.json["id"]))
    assert json.loads(stored.one() or "")["extra"] == json.loads(nested(MAX_DEPTH - 3))
