"""Preconditions on job writes (C10): If-Match on PUT and DELETE, by id and by referenceId,
and If-None-Match: * (create only) on PUT /jobs. Each rule is broken once; the race of two
writers sending one If-Match runs on real threads on committed databases (SQLite and
PostgreSQL)."""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from api.app import create_app
from api.preconditions import entity_tags
from models import employers
from models.core.settings import Settings
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import Account, Api, migrated
from tests.factories import JOBS, create_job, job_body, problem


def etag_of(api: Api, account: Account, job_id: int) -> str:
    result = api.get(f"{JOBS}/{job_id}", key=account.key)
    assert result.status_code == 200, result.text
    return str(result.headers["etag"])


def jobs_count(api: Api, account: Account) -> int:
    return int(api.get(JOBS, key=account.key).json["paging"]["total"])


def unchanged(api: Api, account: Account, job_id: int, etag: str) -> None:
    assert etag_of(api, account, job_id) == etag


def refused(result: falcon.testing.Result, etag: str | None) -> None:
    """A 412 in the C1 shape, with the job's current ETag (none when there is no job)."""
    problem(result, 412, "precondition_failed")
    assert result.headers.get("etag") == etag


@pytest.fixture
def job(api: Api, employer: Account) -> dict[str, Any]:
    return create_job(api, employer, referenceId="REF-1")


# --- If-Match ---------------------------------------------------------------------------------


def test_a_matching_tag_lets_a_put_by_id_write(
    api: Api, employer: Account, job: dict[str, Any]
) -> None:
    etag = etag_of(api, employer, job["id"])
    result = api.put(
        f"{JOBS}/{job['id']}", json={"title": "Baker"}, key=employer.key, headers={"If-Match": etag}
    )
    assert result.status_code == 200, result.text
    assert result.json["title"] == "Baker" and result.headers["etag"] != etag


def test_the_etag_a_write_answered_matches_without_a_get(api: Api, employer: Account) -> None:
    """The ETag compared is the read representation's, also when no GET kept a copy of it."""
    created = api.post(JOBS, json=job_body(referenceId="R"), key=employer.key)
    path = f"{JOBS}/{created.json['id']}"
    headers = {"If-Match": created.headers["etag"]}
    result = api.put(path, json={"title": "Baker"}, key=employer.key, headers=headers)
    assert result.status_code == 200, result.text
    again = api.put(path, json={"title": "Cook"}, key=employer.key, headers=headers)
    refused(again, result.headers["etag"])


WRITES = ["put-by-id", "delete-by-id", "put-by-reference", "delete-by-reference"]


def write(
    api: Api, account: Account, kind: str, job: dict[str, Any], headers: dict[str, str]
) -> falcon.testing.Result:
    """One of the four writes If-Match applies to, on `job`."""
    by_id, ref = f"{JOBS}/{job['id']}", {"referenceId": job["referenceId"]}
    key = account.key
    if kind == "put-by-id":
        return api.put(by_id, json={"title": "Baker"}, key=key, headers=headers)
    if kind == "delete-by-id":
        return api.delete(by_id, key=key, headers=headers)
    if kind == "put-by-reference":
        return api.put(JOBS, json={**ref, "title": "Baker"}, key=key, headers=headers)
    return api.delete(JOBS, json=ref, key=key, headers=headers)


@pytest.mark.parametrize("kind", WRITES)
def test_a_matching_tag_lets_each_write_through(
    api: Api, employer: Account, job: dict[str, Any], kind: str
) -> None:
    etag = etag_of(api, employer, job["id"])
    result = write(api, employer, kind, job, {"If-Match": etag})
    assert result.status_code in (200, 204), result.text


@pytest.mark.parametrize("kind", WRITES)
@pytest.mark.parametrize(
    "if_match",
    [
        '"0123456789abcdef0123456789abcdef"',  # another tag
        "W/{etag}",  # the weak form of the current tag never matches strongly
        "{bare}",  # the tag without its quotes: not an entity-tag
        '{etag}, "abc',  # an unclosed quote: not a list of entity-tags
        "*, {etag}",  # * stands alone
        "",
    ],
    ids=["other-tag", "weak", "unquoted", "unclosed", "star-in-list", "empty"],
)
def test_a_tag_that_does_not_match_is_412_and_changes_nothing(
    api: Api, employer: Account, job: dict[str, Any], kind: str, if_match: str
) -> None:
    etag = etag_of(api, employer, job["id"])
    value = if_match.format(etag=etag, bare=etag.strip('"'))
    refused(write(api, employer, kind, job, {"If-Match": value}), etag)
    unchanged(api, employer, job["id"], etag)


def test_a_list_with_one_matching_tag_matches(
    api: Api, employer: Account, job: dict[str, Any]
) -> None:
    etag = etag_of(api, employer, job["id"])
    listed = f'"abc", W/"def",, {etag} ,"x,y"'
    result = write(api, employer, "put-by-id", job, {"If-Match": listed})
    assert result.status_code == 200, result.text


@pytest.mark.parametrize("kind", WRITES)
def test_star_matches_an_existing_job(
    api: Api, employer: Account, job: dict[str, Any], kind: str
) -> None:
    result = write(api, employer, kind, job, {"If-Match": "*"})
    assert result.status_code in (200, 204), result.text


def test_if_match_on_put_by_reference_of_no_job_is_412_and_creates_nothing(
    api: Api, employer: Account
) -> None:
    for value in ("*", '"0123456789abcdef0123456789abcdef"'):
        body = job_body(referenceId="NEW-1")
        result = api.put(JOBS, json=body, key=employer.key, headers={"If-Match": value})
        refused(result, None)
        assert jobs_count(api, employer) == 0


def test_404_comes_before_412(api: Api, employer: Account, job: dict[str, Any]) -> None:
    headers = {"If-Match": '"nope"'}
    missing = {"id": 2_000_000_000, "referenceId": "NO-SUCH"}
    for kind in ("put-by-id", "delete-by-id", "delete-by-reference"):
        problem(write(api, employer, kind, missing, headers), 404, "not_found")
    other = create_job(api, employer, referenceId="REF-2")
    problem(write(api, employer, "delete-by-id", other, headers), 412, "precondition_failed")


def test_412_comes_before_409_and_422(api: Api, employer: Account, job: dict[str, Any]) -> None:
    create_job(api, employer, referenceId="TAKEN")
    etag = etag_of(api, employer, job["id"])
    headers, key = {"If-Match": '"nope"'}, employer.key
    path = f"{JOBS}/{job['id']}"
    refused(api.put(path, json={"referenceId": "TAKEN"}, key=key, headers=headers), etag)
    refused(api.put(path, json={"title": ""}, key=key, headers=headers), etag)
    bad = {"referenceId": "REF-1", "title": "", "locations": []}
    refused(api.put(JOBS, json=bad, key=key, headers=headers), etag)
    create_only = {"If-None-Match": "*"}
    refused(api.put(JOBS, json=bad, key=key, headers=create_only), etag)
    # without the header, the same requests are the 409 and the 422 they were
    problem(api.put(path, json={"referenceId": "TAKEN"}, key=key), 409, "duplicate_reference_id")
    problem(api.put(path, json={"title": ""}, key=key), 422, "validation_failed")


# --- If-None-Match ----------------------------------------------------------------------------


def test_if_none_match_star_on_put_by_reference_creates_only(
    api: Api, employer: Account, job: dict[str, Any]
) -> None:
    etag = etag_of(api, employer, job["id"])
    headers = {"If-None-Match": "*"}
    existing = job_body(referenceId="REF-1", title="Baker")
    refused(api.put(JOBS, json=existing, key=employer.key, headers=headers), etag)
    unchanged(api, employer, job["id"], etag)
    created = api.put(JOBS, json=job_body(referenceId="NEW-2"), key=employer.key, headers=headers)
    assert created.status_code == 201, created.text


def test_if_none_match_is_ignored_on_the_other_writes(
    api: Api, employer: Account, job: dict[str, Any]
) -> None:
    etag = etag_of(api, employer, job["id"])
    for value in ("*", etag):
        result = write(api, employer, "put-by-id", job, {"If-None-Match": value})
        assert result.status_code == 200, result.text
    # on PUT /jobs only * counts: a tag is ignored
    result = write(api, employer, "put-by-reference", job, {"If-None-Match": '"abc"'})
    assert result.status_code == 200, result.text
    result = write(api, employer, "delete-by-reference", job, {"If-None-Match": "*"})
    assert result.status_code == 204, result.text


# --- method override --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_method_override_carries_if_match(
    api: Api, employer: Account, job: dict[str, Any], method: str
) -> None:
    etag, path = etag_of(api, employer, job["id"]), f"{JOBS}/{job['id']}"
    body = {"title": "Baker"} if method == "PUT" else None
    override = {"X-HTTP-Method-Override": method}
    wrong = api.post(path, json=body, key=employer.key, headers={**override, "If-Match": '"x"'})
    refused(wrong, etag)
    unchanged(api, employer, job["id"], etag)
    right = api.post(path, json=body, key=employer.key, headers={**override, "If-Match": etag})
    assert right.status_code in (200, 204), right.text


# --- parsing ----------------------------------------------------------------------------------


def test_entity_tags_are_parsed_as_a_list() -> None:
    assert entity_tags('"a", W/"b" ,,"c,d"') == [(False, '"a"'), (True, '"b"'), (False, '"c,d"')]
    for bad in ("a", '"a', 'w/"a"', '"a" "b"', "*", "", " , "):
        assert entity_tags(bad) is None, bad


# --- two writers, one If-Match ----------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """A migrated database of the module's own, whose data is committed: the suite's
    rolled-back transaction would hold both writers in one connection."""
    with migrated(request.param, tmp_path_factory.mktemp("pre")) as engine:
        yield engine


class Meeting:
    """The service date (asked for by a PUT once its precondition held): each writer waits
    up to a second there for the other, so two writers that both passed the check write
    together; one that waits for the other's lock meets no one and goes on alone."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2)

    def __call__(self) -> date:
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait(1)
        return date(2026, 3, 10)


@pytest.mark.parametrize("kind", ["put-by-id", "put-by-reference"])
def test_of_two_writers_with_the_same_if_match_exactly_one_wins(
    database: Engine, settings: Settings, kind: str
) -> None:
    sessions: sessionmaker[Any] = make_sessionmaker(database)
    with session_scope(sessions) as s:
        made = employers.create_employer(s, f"Maple {secrets.token_hex(3)}")
        account = Account(made.id, made.name, employers.issue_key(s, made.id).key)
    meeting = Meeting()
    api = Api(create_app(settings, sessions, today=meeting))
    job = create_job(api, account, referenceId="RACE")
    etag = etag_of(api, account, job["id"])
    start = threading.Barrier(2)

    def send(title: str) -> falcon.testing.Result:
        start.wait(10)
        body = {"title": title} if kind == "put-by-id" else {"referenceId": "RACE", "title": title}
        path = f"{JOBS}/{job['id']}" if kind == "put-by-id" else JOBS
        return api.put(path, json=body, key=account.key, headers={"If-Match": etag})

    meeting.barrier.reset()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(send, ["Baker", "Cook"]))
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200, 412], [r.text for r in results]
    winner = next(r for r in results if r.status_code == 200)
    loser = next(r for r in results if r.status_code == 412)
    assert loser.headers["etag"] == winner.headers["etag"] == etag_of(api, account, job["id"])


def test_a_browser_may_send_if_match(api: Api) -> None:
    """C2: a preflight allows the header, or a browser could never send a conditional write."""
    result = api.client.simulate_options(
        f"{JOBS}/1",
        headers={
            "Origin": "https://board.example",
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "api-key, if-match",
        },
    )
    allowed = {h.strip().lower() for h in result.headers["access-control-allow-headers"].split(",")}
    assert "if-match" in allowed
