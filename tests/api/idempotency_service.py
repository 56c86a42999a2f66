"""What the Idempotency-Key tests (C10) share: the app on a committed, migrated database of each
test module's own (SQLite and PostgreSQL, the `database` and `sessions` fixtures), with a clock,
a rate gate and holds that let a test stop a request midway (`service`), the checks of a
replay, and the public form's token and submit."""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from api.app import Collaborators, create_app
from models import employers
from models.core.settings import Settings
from models.db.entities import Application, IdempotencyKey, Job
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.idempotency import Scope
from tests.conftest import Account, Api, migrated
from tests.factories import JOBS, job_body

HEADER = "Idempotency-Key"
TODAY = date(2026, 3, 10)
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
TOKEN = re.compile(r'<input type="hidden" name="idempotencyKey" value="([^"]+)">')
APPLICANT = {"name": "Élodie Côté", "email": "elodie@example.org", "coverLetter": "I bake."}
THREADS = 8


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """A migrated database of the module's own, whose data is committed."""
    with migrated(request.param, tmp_path_factory.mktemp("keys")) as engine:
        yield engine


class Instant:
    """The app's clock (`Collaborators.now`): the tests move it to age keys and leases."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


class Hold:
    """Holds the next request that reaches it mid-processing (its key marked, nothing stored
    yet) until `released`; or makes it fail."""

    def __init__(self) -> None:
        self.armed = self.fail = False
        self.reached, self.released = threading.Event(), threading.Event()
        self.lock = threading.Lock()

    def arm(self) -> None:
        self.reached.clear()
        self.released.clear()
        self.armed = True

    def __call__(self) -> None:
        if self.fail:
            raise RuntimeError("the request failed mid-processing")
        with self.lock:
            mine, self.armed = self.armed, False
        if mine:
            self.reached.set()
            assert self.released.wait(30)


def hold_once_marked(sessions: sessionmaker[Session], hold: Hold) -> Callable[[], None]:
    """Make `hold` hold the request that has just committed a new key's mark (its key marked,
    nothing of its own stored yet); returns what undoes it."""

    def flushed(session: Session, _context: Any) -> None:
        if any(isinstance(row, IdempotencyKey) for row in session.new):
            session.info["marked"] = True

    def ended(session: Session, transaction: SessionTransaction) -> None:
        if transaction.parent is None and session.info.pop("marked", False):
            hold()  # the outermost transaction's end: the mark is committed

    event.listen(sessions, "after_flush", flushed)
    event.listen(sessions, "after_transaction_end", ended)

    def undo() -> None:
        event.remove(sessions, "after_flush", flushed)
        event.remove(sessions, "after_transaction_end", ended)

    return undo


class Gate:
    """The apply rate limiter (C8), which the application endpoints reach after the key's own
    answers and before its mark: it can refuse a request with 429."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold
        self.wait: int | None = None
        self.probe: Callable[[], None] = lambda: None  # looks at the database as it counts

    def hit(self, key: str) -> int | None:
        self.hold()
        self.probe()
        return self.wait


@dataclasses.dataclass
class Service:
    api: Api
    pages: falcon.testing.TestClient
    sessions: sessionmaker[Session]
    employer: Account
    instant: Instant
    hold: Hold
    gate: Gate
    enqueued: list[int]
    backend: str
    marked: Hold  # holds the next request whose key's mark was just committed

    def post_job(
        self,
        key: str | None = None,
        body: Any = None,
        *,
        account: Account | None = None,
        headers: dict[str, str] | None = None,
        path: str = JOBS,
    ) -> falcon.testing.Result:
        sent = {**({HEADER: key} if key is not None else {}), **(headers or {})}
        data = body if isinstance(body, bytes) else json.dumps(body or job_body()).encode()
        sent.setdefault("Content-Type", "application/json")
        return self.api.post(path, key=(account or self.employer).key, body=data, headers=sent)

    def apply(
        self, job_id: int, key: str | None = None, body: Any = None, **kw: Any
    ) -> falcon.testing.Result:
        headers = {HEADER: key} if key is not None else {}
        if isinstance(body, dict) and "body" in body:  # multipart keywords
            headers |= body["headers"]
            return self.api.post(apply_path(job_id), body=body["body"], headers=headers, **kw)
        return self.api.post(apply_path(job_id), json=body or APPLICANT, headers=headers, **kw)

    def job(self, **overrides: Any) -> int:
        result = self.post_job(body=job_body(**{"status": "active", **overrides}))
        assert result.status_code == 201, result.text
        job_id: int = result.json["id"]
        return job_id

    def jobs(self, account: Account | None = None) -> int:
        with self.sessions() as s:
            query = select(func.count()).select_from(Job)
            return s.scalar(query.where(Job.employer_id == (account or self.employer).id)) or 0

    def applications(self, job_id: int) -> list[int]:
        with self.sessions() as s:
            return list(s.scalars(select(Application.id).where(Application.job_id == job_id)))

    def key_row(self, scope: Scope, key: str) -> IdempotencyKey | None:
        with self.sessions() as s:
            return s.get(IdempotencyKey, (scope.kind, scope.id, key))

    def employer_scope(self, account: Account | None = None) -> Scope:
        return Scope("employer", (account or self.employer).id)

    def new_employer(self) -> Account:
        return new_employer(self.sessions)


def apply_path(job_id: int) -> str:
    return f"{JOBS}/{job_id}/applications"


def new_employer(sessions: sessionmaker[Session]) -> Account:
    with session_scope(sessions) as s:
        employer = employers.create_employer(s, f"Maple {secrets.token_hex(3)}")
        issued = employers.issue_key(s, employer.id)
        return Account(employer.id, employer.name, issued.key)


@pytest.fixture(scope="module")
def sessions(database: Engine) -> sessionmaker[Session]:
    """One factory for the module: the app makes its engine for reads once per
    factory (models.db.unit_of_work.read_sessions)."""
    return make_sessionmaker(database)


@pytest.fixture
def service(
    database: Engine, sessions: sessionmaker[Session], settings: Settings
) -> Iterator[Service]:
    instant, hold, marked = Instant(), Hold(), Hold()
    gate, enqueued = Gate(hold), []

    def today() -> date:
        hold()  # POST /jobs asks for the date while it writes the job
        return TODAY

    parts = Collaborators(
        enqueue=lambda app_id, _rid: enqueued.append(app_id), limiter=gate, now=instant
    )
    app = create_app(settings, sessions, parts, today=today)
    undo = hold_once_marked(sessions, marked)
    yield Service(
        Api(app),
        falcon.testing.TestClient(app),
        sessions,
        new_employer(sessions),
        instant,
        hold,
        gate,
        enqueued,
        database.dialect.name,
        marked,
    )
    undo()


def replayed(first: falcon.testing.Result, again: falcon.testing.Result) -> None:
    """`again` is `first` replayed byte for byte (C10)."""
    assert again.status_code == first.status_code
    assert again.content == first.content
    for name in ("location", "etag", "content-type"):
        assert again.headers.get(name) == first.headers.get(name), name
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers


def fresh(result: falcon.testing.Result, status: int) -> None:
    assert result.status_code == status, result.text
    assert "idempotent-replayed" not in result.headers


def multipart(
    fields: dict[str, str],
    resume: tuple[str, bytes] | None = None,
    *,
    boundary: str = "jobpostBoundaryOne",
    part_type: str | None = None,
) -> dict[str, Any]:
    """simulate_post keywords for a multipart/form-data body; `part_type` adds a
    Content-Type header to each text part."""
    out = b""
    extra = f"Content-Type: {part_type}\r\n" if part_type else ""
    for name, value in fields.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n{extra}\r\n'
        out += head.encode() + value.encode() + b"\r\n"
    if resume is not None:
        filename, data = resume
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="resume"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        out += head.encode() + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return {"body": out, "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


def in_parallel(n: int, call: Callable[[], falcon.testing.Result]) -> list[falcon.testing.Result]:
    """`call` on `n` threads at once."""
    barrier = threading.Barrier(n)

    def run() -> falcon.testing.Result:
        barrier.wait(10)
        return call()

    with ThreadPoolExecutor(n) as pool:
        return [f.result(60) for f in [pool.submit(run) for _ in range(n)]]


def form_token(service: Service, job_id: int) -> str:
    page = service.pages.simulate_get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert page.headers["cache-control"] == "private, no-cache"  # the token is this visitor's
    [token] = TOKEN.findall(page.text)
    return str(token)


def submit(service: Service, job_id: int, fields: dict[str, str]) -> falcon.testing.Result:
    return service.pages.simulate_post(f"/jobs/{job_id}/apply", **multipart(fields))
