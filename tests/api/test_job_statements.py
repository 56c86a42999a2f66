"""The SQL statements a job's write and read run on PostgreSQL (issue 15, C4): one for the
key, one to read the job locked for a PUT, one for the write itself (the job, its locations
and categories, the listing of its places), and for a write that changes its job one read of
which events the employer's endpoints take (C12: `job.created`, `job.updated`, `job.deleted`,
precompiled; nothing more when none does); a GET of a job not kept reads it with the key.
Places are resolved from what the process keeps (`models.reference.places.NAMED`); categories,
position types and salary periods from the code's own lists. A write of N locations took
11 statements or more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from models.core.settings import Settings
from models.reference.places import NAMED
from tests.conftest import Api, Clock
from tests.factories import JOBS, job_body, read_shape

pytestmark = pytest.mark.parametrize("engine", ["postgresql"], indirect=True)

# The transaction's own savepoints: the tests' sessions run in one rolled-back transaction.
# And a key's last use, recorded at most once a minute in a transaction of its own after the
# request's answer (C23): what the request runs is what comes before it.
HARNESS = (
    "SAVEPOINT",
    "RELEASE SAVEPOINT",
    "ROLLBACK TO SAVEPOINT",
    "UPDATE api_keys SET last_used_at",
)
PLACES = [
    {"description": "Toronto, ON"},
    {"id": 6077243, "description": "Montréal, QC"},  # as a GET answers it: both
    {"description": "Calgary, AB"},
]


Sent = Callable[[Callable[[], Any]], tuple[list[str], Any]]


@pytest.fixture
def sent(engine: Engine) -> Iterator[Sent]:
    """Run a request; return the statements it sent (the harness's savepoints aside) and
    its answer."""
    statements: list[str] = []

    def keep(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if not statement.startswith(HARNESS):
            statements.append(statement)

    def during(request: Callable[[], Any]) -> tuple[list[str], Any]:
        statements.clear()
        answer = request()
        assert answer.status_code < 300, answer.text
        shown = answer.json
        if isinstance(shown, dict) and "warnings" in shown:  # a write's: as a GET shows it
            shown = read_shape(shown)
        return list(statements), shown

    event.listen(engine, "before_cursor_execute", keep)
    yield during
    event.remove(engine, "before_cursor_execute", keep)


@pytest.fixture
def uncached(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> Api:
    """The API of a web process that keeps no job representation (JOB_CACHE_MB=0)."""
    return Api(create_app(dataclasses.replace(settings, job_cache_mb=0), sessions, today=clock))


def _body(**overrides: Any) -> dict[str, Any]:
    salary = {"amount": 52000, "maxAmount": 61000.5, "period": {"id": 1}}
    body = job_body(locations=PLACES, categories=[{"id": 12}, {"id": 7}], salary=salary)
    return body | overrides


def test_a_post_is_the_key_and_one_write_once_its_places_are_known(
    api: Api, employer: Any, sent: Sent
) -> None:
    NAMED.clear()
    first, _job = sent(lambda: api.post(JOBS, json=_body(), key=employer.key))
    assert len(first) == 3 + len(PLACES)  # each place's name read once by this process
    again, _job = sent(lambda: api.post(JOBS, json=_body(), key=employer.key))
    assert len(again) == 3 and "webhook_endpoints" in again[2], again


def test_a_put_is_the_key_the_locked_job_and_one_write(api: Api, employer: Any, sent: Sent) -> None:
    created, job = sent(lambda: api.put(JOBS, json=_body(referenceId="S-1"), key=employer.key))
    assert len(created) == 4, created  # the key, the job not found, the insert, the ears
    back = {k: v for k, v in job.items() if k not in ("id", "publishDate", "employer")}
    retitled, _job = sent(lambda: api.put(JOBS, json=back | {"title": "Cook"}, key=employer.key))
    assert len(retitled) == 4 and _writes(retitled) == 1, retitled  # the key, lock, ears, write
    path = f"{JOBS}/{job['id']}"
    # By id, the key's statement reads the job whole: after the lock, nothing more to read.
    by_id, _job = sent(lambda: api.put(path, json=back, key=employer.key))
    assert len(by_id) == 4 and _writes(by_id) == 1, by_id
    partial, _job = sent(lambda: api.put(path, json={"title": "Baker"}, key=employer.key))
    assert len(partial) == 4 and _writes(partial) == 1, partial


def test_a_put_that_changes_nothing_writes_nothing(api: Api, employer: Any, sent: Sent) -> None:
    """C10: the merged job equals the stored one, so no statement writes. By id, the job
    read with the key is the locked one while its version is: the key and the lock alone.
    By referenceId, the lock finds the job, whose arrays are then read to compare."""
    _statements, job = sent(lambda: api.put(JOBS, json=_body(referenceId="S-2"), key=employer.key))
    back = {k: v for k, v in job.items() if k not in ("id", "publishDate", "employer")}
    path = f"{JOBS}/{job['id']}"
    changed, _job = sent(lambda: api.put(path, json=back | {"title": "Cook"}, key=employer.key))
    by_id, _job = sent(lambda: api.put(path, json=back | {"title": "Cook"}, key=employer.key))
    assert len(by_id) == 2 and _writes(by_id) == 0, by_id
    assert len(by_id) < len(changed)
    partial, _job = sent(lambda: api.put(path, json={"title": "Cook"}, key=employer.key))
    assert len(partial) == 2 and _writes(partial) == 0, partial
    by_reference, _job = sent(
        lambda: api.put(JOBS, json=back | {"title": "Cook"}, key=employer.key)
    )
    assert len(by_reference) == 3 and _writes(by_reference) == 0, by_reference
    # The row as stored but one array not: read, compared, and written.
    moved = back | {"title": "Cook", "locations": PLACES[:2]}
    arrays, _job = sent(lambda: api.put(JOBS, json=moved, key=employer.key))
    assert len(arrays) == 5 and _writes(arrays) == 1, arrays


def _writes(statements: list[str]) -> int:
    """How many of the statements write (a job's write is one WITH query on PostgreSQL)."""
    return sum(
        s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "WITH")) for s in statements
    )


def test_a_get_of_a_job_not_kept_is_one_statement_with_the_key(
    uncached: Api, employer: Any, sent: Sent
) -> None:
    _statements, job = sent(lambda: uncached.post(JOBS, json=_body(), key=employer.key))
    for _ in range(2):
        read, shown = sent(lambda: uncached.get(f"{JOBS}/{job['id']}", key=employer.key))
        assert len(read) == 1 and shown == job, read


def test_a_kept_job_is_read_whole_once_then_checked_by_its_version(
    api: Api, employer: Any, sent: Sent
) -> None:
    """The first GET reads the job with the key; later ones read its version alone, and the
    job again only once a write changed it (`api.cache`)."""
    _statements, job = sent(lambda: api.post(JOBS, json=_body(), key=employer.key))
    path = f"{JOBS}/{job['id']}"
    first, shown = sent(lambda: api.get(path, key=employer.key))
    assert shown == job and len(first) == 1 and "items.kind" in first[0], first
    kept, shown = sent(lambda: api.get(path, key=employer.key))
    assert shown == job and len(kept) == 1 and "items.kind" not in kept[0], kept
    _statements, job = sent(lambda: api.put(path, json={"title": "Baker"}, key=employer.key))
    changed, shown = sent(lambda: api.get(path, key=employer.key))
    assert shown == job and len(changed) == 2, changed  # the version, then the job


def test_a_delete_is_the_key_the_delete_and_its_tombstone(
    api: Api, employer: Any, sent: Sent
) -> None:
    """The tombstone (C10) is a statement of its own: its stamp is taken after the DELETE
    has waited for a write in flight, as every change's is, rather than before it."""
    _statements, job = sent(lambda: api.post(JOBS, json=_body(referenceId="D-1"), key=employer.key))
    by_id = sent(lambda: api.delete(f"{JOBS}/{job['id']}", key=employer.key))[0]
    assert len(by_id) == 4 and "job_tombstones" in by_id[2], by_id
    sent(lambda: api.post(JOBS, json=_body(referenceId="D-1"), key=employer.key))
    by_reference = sent(lambda: api.delete(JOBS, json={"referenceId": "D-1"}, key=employer.key))[0]
    assert len(by_reference) == 4, by_reference
