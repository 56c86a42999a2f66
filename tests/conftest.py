"""Shared fixtures: one migrated database per backend per run, a rolled-back transaction
per test, an API client that checks every response against the OpenAPI document, and a real
SMTP server (aiosmtpd) for the delivery tests of C8 (`smtp_sink`)."""

from __future__ import annotations

import dataclasses
import functools
import socket
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api import representations
from api.app import WsgiApp, create_app
from models import employers
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.migrate import upgrade
from models.webhooks import payloads
from tests import factories
from tests.harness import SmtpServer, free_port
from tests.openapi_check import check_response
from tests.services import scratch_postgres

# The modules that several test modules share their helpers from, asserts and all: rewritten
# as the test modules are, so that a failing assert there says what it compared.
pytest.register_assert_rewrite(
    "tests.api.applying",
    "tests.api.idempotency_service",
    "tests.models.upkeep_rows",
    "tests.workers.mail_copies",
    "tests.workers.stacks",
)

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session", autouse=True)
def webhook_payloads() -> None:
    """As each entry point does: tests call models functions that emit events directly."""
    payloads.install(representations)


@pytest.fixture(scope="session", params=BACKENDS)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """A migrated database with reference data, once per backend per run."""
    with migrated(request.param, tmp_path_factory.mktemp("db")) as eng:
        yield eng


@contextmanager
def migrated(backend: str, folder: Path, **engine_options: Any) -> Iterator[Engine]:
    """A migrated database with reference data on `backend`: a SQLite file in `folder` (a
    copy of the process's one migrated file), or a PostgreSQL database of its own, dropped
    afterwards. Modules whose writers must commit (races between connections) make theirs
    with this."""
    with ExitStack() as stack:
        if backend == "sqlite":
            url = _copy_sqlite(_migrated_sqlite(), folder / "jobpost.db")
            eng = make_engine(url, **engine_options)
            stack.callback(eng.dispose)
        else:
            eng = make_engine(stack.enter_context(scratch_postgres()), **engine_options)
            stack.callback(eng.dispose)
            upgrade(eng)
        yield eng


@functools.cache
def _migrated_sqlite() -> str:
    """A SQLite file migrated once per test process (per xdist worker), which `migrated`
    copies: migrating and loading the gazetteer takes about 2 s, a copy some milliseconds."""
    folder = tempfile.TemporaryDirectory(prefix="jobpost-migrated-")
    _KEPT.append(folder)  # removed as the process exits
    path = str(Path(folder.name) / "jobpost.db")
    eng = make_engine(f"sqlite:///{path}")
    try:
        upgrade(eng)
    finally:
        eng.dispose()
    return path


_KEPT: list[tempfile.TemporaryDirectory[str]] = []


@pytest.fixture
def sessions(engine: Engine) -> Iterator[sessionmaker[Session]]:
    """Sessions whose commits are savepoints inside one transaction rolled back after the test."""
    connection = engine.connect()
    outer = connection.begin()
    factory = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    yield factory
    outer.rollback()
    connection.close()


@pytest.fixture
def session(sessions: sessionmaker[Session]) -> Iterator[Session]:
    s = sessions()
    yield s
    s.close()


class Clock:
    """The service date the app sees (C5); tests move it to travel in time."""

    def __init__(self, today: date) -> None:
        self.today = today

    def __call__(self) -> date:
        return self.today


@pytest.fixture
def clock() -> Clock:
    return Clock(date(2026, 3, 10))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The defaults, but the keyed API's limits (C23): off, as a test sends thousands of
    sync items and requests a second; tests/api/test_limits.py sets its own."""
    off = (("standard", "off", "off"), ("unlimited", "off", "off"))
    return dataclasses.replace(
        Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}),
        public_base_url=None,
        api_rate_limits=off,
    )


class Api:
    """falcon's test client, checking each response against openapi.json."""

    def __init__(self, app: WsgiApp) -> None:
        self.client = falcon.testing.TestClient(app)

    def request(
        self, method: str, path: str, *, key: str | None = None, **kwargs: Any
    ) -> falcon.testing.Result:
        headers = dict(kwargs.pop("headers", None) or {})
        if key is not None:
            headers["API-Key"] = key
        result = self.client.simulate_request(method, path, headers=headers, **kwargs)
        _check(method, path, headers, result)
        return result

    def get(self, path: str, **kw: Any) -> falcon.testing.Result:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> falcon.testing.Result:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> falcon.testing.Result:
        return self.request("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> falcon.testing.Result:
        return self.request("DELETE", path, **kw)


class CheckedClient(falcon.testing.TestClient):
    """falcon's test client, checking each response against openapi.json (the pages'
    tests use it: they send forms and follow redirects, with no API key)."""

    def simulate_request(self, *args: Any, **kwargs: Any) -> falcon.testing.Result:
        result = super().simulate_request(*args, **kwargs)
        method = args[0] if args else kwargs.get("method", "GET")
        path = args[1] if len(args) > 1 else kwargs.get("path", "/")
        _check(method, path, dict(kwargs.get("headers") or {}), result)
        return result


def _check(method: str, path: str, headers: dict[str, str], result: falcon.testing.Result) -> None:
    content_type = result.headers.get("content-type")
    method = _effective(method, headers)
    check_response(method, path, result.status_code, content_type, result.content)


def _effective(method: str, headers: dict[str, str]) -> str:
    override = {k.lower(): v for k, v in headers.items()}.get("x-http-method-override", "")
    if method == "POST" and override.strip().upper() in ("PUT", "DELETE"):
        return override.strip().upper()
    return method


@pytest.fixture
def app(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> WsgiApp:
    return create_app(settings, sessions, today=clock)


@pytest.fixture
def api(app: WsgiApp) -> Api:
    return Api(app)


@dataclasses.dataclass
class Account:
    id: int
    name: str
    key: str


@pytest.fixture
def make_employer(sessions: sessionmaker[Session]) -> Any:
    def make(name: str = "Maple Corp", plan: str = "standard") -> Account:
        with sessions() as s:
            employer = employers.create_employer(s, name, plan)
            issued = employers.issue_key(s, employer.id)
            s.commit()
            return Account(employer.id, employer.name, issued.key)

    return make


@pytest.fixture
def employer(make_employer: Any) -> Account:
    account: Account = make_employer()
    return account


@pytest.fixture
def job_body() -> Any:
    return factories.job_body


def copy_database(engine: Engine, path: Path) -> str:
    """A committed copy of the suite's migrated SQLite database (`engine`) at `path`, for a
    `jobpost` command or process that opens it by URL; the copy's URL."""
    return _copy_sqlite(str(engine.url.database), path)


def _copy_sqlite(database: str, path: Path) -> str:
    """A consistent copy of the SQLite file `database` at `path` (SQLite's backup, which
    reads through the WAL); the copy's URL."""
    source, target = sqlite3.connect(database), sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return f"sqlite:///{path}"


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What the sweeper hands to the broker, recorded instead of sent."""
    import workers.enqueue

    sent: list[int] = []

    def deliver(_app: Any, application_id: int, request_id: str | None = None) -> bool:
        sent.append(application_id)
        return True

    monkeypatch.setattr(workers.enqueue, "deliver", deliver)
    return sent


@dataclasses.dataclass
class SmtpSink:
    """Stores what it accepts; `reply` (RCPT) or `data_reply` (DATA) make it refuse instead."""

    host: str
    port: int
    reply: str | None = None
    data_reply: str | None = None
    messages: list[EmailMessage] = dataclasses.field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if self.reply is not None:
            return self.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.data_reply is not None:
            return self.data_reply
        parsed = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


def nowhere_url(port: int, query: str = "") -> str:
    """A PostgreSQL URL on `port` of this machine, where no database is (nothing listens, or
    `silent_port`'s server that never answers)."""
    return f"postgresql+psycopg://nobody@127.0.0.1:{port}/none" + (f"?{query}" if query else "")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose server takes every connection and never says a word (a hung server, a
    black-holed network): only a timeout of the client's ends the wait."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def hold() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for conn in held:  # a client still waiting gets its end of file
        conn.close()


@pytest.fixture
def unused_port() -> int:
    """A port with no server behind it: connecting is refused."""
    return free_port()


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    """A running SMTP server on 127.0.0.1 and a free port, stopped after the test."""
    with SmtpServer(SmtpSink(host="127.0.0.1", port=free_port())) as sink:
        yield sink
