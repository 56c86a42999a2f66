"""How a request reaches the database, as the web process runs it (sessions on the engine,
not the tests' rolled-back connection): one pooled connection per request, given back after
it, and a job served from the kept copies (C4 GET one job) runs no statement but the key's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, delete, event, update
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from models import employers
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import Employer, Job
from models.db.unit_of_work import make_sessionmaker, read_sessions
from tests.conftest import Account, Api, Clock, nowhere_url
from tests.factories import JOBS, create_job, problem


@pytest.fixture
def factory(engine: Engine) -> Iterator[sessionmaker[Session]]:
    made = make_sessionmaker(engine)
    yield made
    reads = read_sessions(made).kw["bind"]
    if reads is not engine:  # the pool of the reads' connections, made for this one
        reads.dispose()


@pytest.fixture
def committed(factory: sessionmaker[Session]) -> Iterator[Account]:
    """An employer committed for real (the app's connections cannot see the tests' rolled-back
    transaction), deleted with its jobs and keys afterwards."""
    with factory() as s:
        employer = employers.create_employer(s, "Engine Bound Ltd")
        issued = employers.issue_key(s, employer.id)
        s.commit()
        account = Account(employer.id, employer.name, issued.key)
    yield account
    with factory() as s:
        s.execute(delete(Employer).where(Employer.id == account.id))
        s.commit()


class Watch:
    """Pool checkouts, and statements sent through SQLAlchemy, on the engines a request uses."""

    def __init__(self, engines: set[Engine]) -> None:
        self.engines = engines
        self.checkouts = 0
        self.statements: list[str] = []
        for e in engines:
            event.listen(e, "checkout", self._checkout)
            event.listen(e, "before_cursor_execute", self._statement)

    def _checkout(self, *_: Any) -> None:
        self.checkouts += 1

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.statements.append(statement)

    def reset(self) -> None:
        self.checkouts, self.statements = 0, []

    def checked_out(self) -> int:
        return sum(e.pool.checkedout() for e in self.engines)  # type: ignore[attr-defined]

    def close(self) -> None:
        for e in self.engines:
            event.remove(e, "checkout", self._checkout)
            event.remove(e, "before_cursor_execute", self._statement)


@pytest.fixture
def watch(engine: Engine, factory: sessionmaker[Session]) -> Iterator[Watch]:
    reads = read_sessions(factory).kw["bind"]
    watching = Watch({engine, reads})
    yield watching
    watching.close()


@pytest.fixture
def engine_api(settings: Settings, factory: sessionmaker[Session], clock: Clock) -> Api:
    return Api(create_app(settings, factory, today=clock))


def test_a_kept_job_costs_one_checkout_and_no_orm_statement(
    engine_api: Api, committed: Account, watch: Watch
) -> None:
    job = create_job(engine_api, committed)
    assert engine_api.get(f"{JOBS}/{job['id']}", key=committed.key).json == job  # now kept
    watch.reset()
    for _ in range(3):
        again = engine_api.get(f"{JOBS}/{job['id']}", key=committed.key)
        assert again.status_code == 200 and again.json == job
    assert watch.checkouts == 3  # one connection a request
    assert len(watch.statements) == 3  # and one statement: the key and the job's version
    assert all("FROM api_keys" in s for s in watch.statements)
    assert watch.checked_out() == 0  # every connection given back


def test_every_request_uses_one_connection_and_gives_it_back(
    engine_api: Api, committed: Account, watch: Watch
) -> None:
    """Reads that need the ORM (the list) run it on the connection that checked the key;
    writes run the key's statement inside their transaction. Errors give theirs back too."""
    job = create_job(engine_api, committed, referenceId="R-1")
    calls = [
        ("get", JOBS, {}),
        ("get", f"{JOBS}/{job['id']}", {}),
        ("put", JOBS, {"json": {**job, "referenceId": "R-1", "title": "Baker II"}}),
        ("get", f"{JOBS}/999999999", {}),  # 404
        ("post", JOBS, {"json": {"title": ""}}),  # 422, rolled back
    ]
    for method, path, kw in calls:
        watch.reset()
        result = getattr(engine_api, method)(path, key=committed.key, **kw)
        assert result.status_code < 500, result.text
        assert watch.checkouts == 1, (method, path)
        assert watch.checked_out() == 0, (method, path)
    watch.reset()
    assert engine_api.get("/healthz").status_code == 200
    assert watch.checkouts == 0  # /healthz opens nothing
    assert engine_api.get(JOBS, key="jp_not-a-live-key-at-all").status_code == 401
    assert watch.checked_out() == 0


@pytest.fixture
def unreachable(settings: Settings, unused_port: int) -> Iterator[Api]:
    """The app on a PostgreSQL that is not there (down, or restarting)."""
    engine = make_engine(nowhere_url(unused_port))
    yield Api(create_app(settings, make_sessionmaker(engine)))
    engine.dispose()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{JOBS}/1"),
        ("GET", JOBS),
        ("POST", f"{JOBS}/1/applications"),
        ("GET", "/api/v1.1/positiontypes"),
    ],
)
def test_a_database_that_does_not_answer_is_503_with_retry_after(
    unreachable: Api, method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a 500 with a traceback per request: a client retries, an operator sees one line."""
    json = {"name": "Ann", "email": "ann@example.org"} if method == "POST" else None
    result = unreachable.request(method, path, json=json, key="jp_" + "k" * 40)
    body = problem(result, 503, "database_unavailable")
    assert result.headers["retry-after"] == "5"
    assert "database" in body["detail"] and "127.0.0.1" not in body["detail"]
    [line] = [r for r in caplog.records if r.name == "jobpost.api"]
    assert line.getMessage().startswith("database unavailable: ") and line.exc_info is None


def test_the_applicant_pages_say_so_in_html(unreachable: Api) -> None:
    result = unreachable.get("/jobs/1")
    assert result.status_code == 503 and result.headers["retry-after"] == "5"
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert "Temporarily unavailable" in result.text
    assert "default-src 'none'" in result.headers["content-security-policy"]


def test_a_read_answers_while_a_writer_holds_the_database(
    engine_api: Api, committed: Account, engine: Engine
) -> None:
    """A GET reads the last committed state at once, though another writer holds the lock
    (SQLite's write lock, PostgreSQL's row lock) for longer than a client waits; its next
    GET, once that writer committed, reads the change."""
    job = create_job(engine_api, committed, title="Baker")
    path = f"{JOBS}/{job['id']}"
    assert engine_api.get(path, key=committed.key).json["title"] == "Baker"  # now kept
    with engine.connect() as writer:  # BEGIN IMMEDIATE on SQLite: the write lock, held
        writer.execute(
            update(Job)
            .where(Job.id == job["id"])
            .values(title="Head Baker", version=Job.version + 1)
        )
        answered: list[Any] = []
        reader = threading.Thread(
            target=lambda: answered.extend(
                engine_api.get(read, key=committed.key)
                for read in (path, JOBS, f"{JOBS}?sort=updatedAt", "/api/v1.1/syncs")
            )
        )
        reader.start()
        reader.join(timeout=10)  # SQLite's busy timeout is 30 s
        assert not reader.is_alive(), "the GETs waited for the writer"
        one, page, feed, runs = answered
        assert one.status_code == 200 and one.json["title"] == "Baker"
        assert page.status_code == 200 and [j["title"] for j in page.json["data"]] == ["Baker"]
        assert feed.status_code == 200 and runs.status_code == 200 and runs.json["data"] == []
        writer.commit()
    assert engine_api.get(path, key=committed.key).json["title"] == "Head Baker"
