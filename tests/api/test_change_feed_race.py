"""C10's promise under load: a client that walks the change feed while several writers change
jobs, and later resumes from its last `next`, sees every change made after its walk began, at
least once, in that state or a later one. Committed data on a database of the module's own
(SQLite and PostgreSQL), writers in threads whose transactions stay open a while after each
statement, so that changes commit well after their updatedAt: without the lag, a walk passing
those times would skip them for good."""

from __future__ import annotations

import dataclasses
import random
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from api.app import Collaborators, create_app
from models import employers
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import Account, Api, Clock, migrated
from tests.factories import JOBS, job_body

LAG = 2.0  # CHANGE_FEED_LAG_SECONDS here: the walk keeps up closely
WRITERS, WRITES = 3, 12


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    with migrated(request.param, tmp_path_factory.mktemp("feed"), pool_size=10) as engine:
        yield engine


def slow_writes(engine: Engine) -> Any:
    """Hold each transaction open up to 40 ms after each statement that writes a job: the
    commit comes well after the stamp (within half the lag, which the commit check asks)."""

    def linger(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT INTO JOBS", "UPDATE JOBS", "WITH")):
            time.sleep(random.uniform(0, 0.04))

    event.listen(engine, "after_cursor_execute", linger)
    return linger


def test_a_walk_and_its_resumption_see_every_change_made_after_it_began(
    database: Engine, settings: Settings
) -> None:
    sessions: sessionmaker[Session] = make_sessionmaker(database, LAG)
    with session_scope(sessions) as s:
        made = employers.create_employer(s, f"Feed {secrets.token_hex(3)}")
        account = Account(made.id, made.name, employers.issue_key(s, made.id).key)
    lagged = dataclasses.replace(settings, change_feed_lag_seconds=LAG)
    clock = Clock(utcnow().date())
    api = Api(create_app(lagged, sessions, today=clock))
    # Resuming "later": the present past every commit and the lag, without waiting for it.
    later = Api(
        create_app(
            lagged,
            sessions,
            Collaborators(now=lambda: utcnow() + timedelta(seconds=60)),
            today=clock,
        )
    )
    first = api.get(JOBS, key=account.key, params={"sort": "updatedAt", "pageSize": 5})
    assert first.status_code == 200
    link = first.json["paging"]["next"]
    linger = slow_writes(database)
    changes: list[tuple[int, str]] = []
    lock = threading.Lock()

    def write(writer: int) -> None:
        for i in range(WRITES):
            ref = f"W{writer}-{i % 4}"
            body = job_body(referenceId=ref, title=f"Writer {writer} take {i}")
            result = api.put(JOBS, key=account.key, json=body)
            assert result.status_code in (200, 201), result.text
            with lock:
                changes.append((result.json["id"], result.json["updatedAt"]))

    seen: dict[int, str] = {}

    def take(client: Api, link: str) -> tuple[list[dict[str, Any]], str]:
        parts = urlsplit(link)
        result = client.get(parts.path, key=account.key, query_string=parts.query)
        assert result.status_code == 200, result.text
        for job in result.json["data"]:
            seen[job["id"]] = max(seen.get(job["id"], ""), job["updatedAt"])
        return result.json["data"], result.json["paging"]["next"]

    pages = 0
    try:
        with ThreadPoolExecutor(WRITERS) as pool:
            futures = [pool.submit(write, w) for w in range(WRITERS)]
            while not all(f.done() for f in futures):  # walk while they write
                _data, link = take(api, link)
                pages += 1
                time.sleep(0.02)
            for future in futures:
                future.result()
    finally:
        event.remove(database, "after_cursor_execute", linger)
    while True:  # later: resume from the last next, to the end of the feed
        data, link = take(later, link)
        if not data:
            break
    assert pages > 0 and len(changes) == WRITERS * WRITES
    missed = [(job, at) for job, at in changes if seen.get(job, "") < at]
    assert missed == [], f"{len(missed)} of {len(changes)} changes never seen"
