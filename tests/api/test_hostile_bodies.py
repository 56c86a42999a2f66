"""Bodies built to break a later step answer in the C1 shape, never 500 (C1, C10, C11): JSON
nested deeper than MAX_DEPTH, with or without an Idempotency-Key."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.body import MAX_DEPTH, parse_json, parse_json_streamed
from api.errors import Problem
from api.idempotency import canonical, canonical_parts
from models.db.entities import IdempotencyKey, SyncItem
from models.syncs import requests as sync_requests
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


# --- a sync body's parse, within a few times its size ------------------------------------------


def big_sync_body(item_of: Any, size: int = 9_500_000) -> bytes:
    """A sync run of at most 10,000 items (C11), as many as make about `size` bytes."""
    one = len(json.dumps(item_of(0)))
    count = min(sync_requests.PER_REQUEST, size // one)
    return json.dumps({"mode": "upsert", "jobs": [item_of(i) for i in range(count)]}).encode()


def realistic(i: int) -> dict[str, Any]:
    description = "<p>" + "Bake bread, then sell it. " * 40 + "</p>"
    return {**job_body(title=f"Baker {i}", description=description), "referenceId": f"R-{i}"}


def numbers(i: int) -> dict[str, Any]:
    """Small values by the thousand: each JSON number becomes a Decimal of about 100 bytes."""
    return {"referenceId": f"N-{i}", "salary": {"amount": [1.5] * 100}}


def peak_of(work: Any) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("item_of", "size"),
    [(realistic, 9_500_000), (numbers, 1_000_000)],  # tracemalloc slows a Decimal's making
    ids=["jobs", "numbers"],
)
def test_a_sync_bodys_parse_takes_under_five_times_its_size(item_of: Any, size: int) -> None:
    """C11: a 9.5 MiB body took 318 MiB; the items are now kept as their JSON text as they
    are read, and the Idempotency-Key's form of them is hashed piece by piece."""

    def parse_and_fingerprint() -> None:
        body = parse_json_streamed(data, "jobs", sync_requests.pack, most=sync_requests.PER_REQUEST)
        assert len(sync_requests.check_request(body, dry_run=False).items) > 1000
        digest = hashlib.sha256()
        for part in canonical_parts(["json", body]):
            digest.update(part.encode())

    data = big_sync_body(item_of, size)
    assert len(data) > 0.9 * size
    assert peak_of(parse_and_fingerprint) < 5 * len(data)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"mode": "upsert", "jobs": [{"referenceId": "A", "n": 1.50}, 7, [], null]}',
        b' \r\n{ "jobs" :[ ] , "open":true }\t',
        b'\xef\xbb\xbf{"j\\u006fbs": [{"referenceId": "\\u00e9"}], "jobs": [{"a": 1e2}]}',
        b'{"jobs": {"not": "a list"}, "x": [[[]]]}',
        b'{"jobs": "[", "mode": "snapshot"}',
        b"{}",
        b'{"jobs": [{"referenceId": "A"},]}',
        b'{"jobs": [{"referenceId": "A"}] "mode": 1}',
        b'{"jobs": [{"referenceId": "A"}]} {}',
        b'{"jobs": [{"referenceId": "A"}]',
        b'{"jobs": [{"title": "\\ud800"}]}',
        b'{"\\udc00": 1}',
        b'{"jobs": [NaN]}',
        b'{"jobs": [1, 2}',
        b"{jobs: []}",
        b"[]",
        b"",
        b'{"jobs": [' + b'{"a":' * 62 + b"{}" + b"}" * 62 + b"]}",  # 65 levels
        b'{"jobs": [' + b'{"a":' * 61 + b"{}" + b"}" * 61 + b"]}",  # 64 levels
        b'{"jobs": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
    ],
)
def test_the_streamed_parse_reads_what_parse_json_reads(raw: bytes) -> None:
    """The same body, or the same 400: the sync endpoints answer as every other one does."""
    try:
        expected: Any = canonical(parse_json(raw))
    except Problem as e:
        expected = e.problem_code
    try:
        got: Any = canonical(parse_json_streamed(raw, "jobs", sync_requests.pack, most=10))
    except Problem as e:
        got = e.problem_code
    assert got == expected


def test_a_keyed_sync_run_is_compared_as_values(api: Any, employer: Any) -> None:
    """C10: a retry written differently is replayed; one with another item is refused."""
    first = b'{"mode": "upsert", "jobs": [{"referenceId": "K-1", "title": "Baker", "n": 1.0}]}'
    again = b'{ "jobs":[{"n":1,"title":"Baker","referenceId":"K-1"}],"mode":"upsert"}'
    other = b'{"mode": "upsert", "jobs": [{"referenceId": "K-1", "title": "Cook", "n": 1}]}'
    result = api.post(SYNCS, body=first, headers=KEYED, key=employer.key)
    assert result.status_code == 202, result.text
    replay = api.post(SYNCS, body=again, headers=KEYED, key=employer.key)
    assert replay.headers.get("idempotent-replayed") == "true" and replay.text == result.text
    problem(
        api.post(SYNCS, body=other, headers=KEYED, key=employer.key), 422, "idempotency_key_reused"
    )
