"""Idempotency-Key (C10) on POST /jobs, on POST /jobs/{id}/applications and through the
public form's one-time token, on committed databases of this module's own (SQLite and
PostgreSQL): a key is marked in a transaction of its own, which the suite's rolled-back test
transaction could not show, and concurrent first uses run on real threads."""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import falcon.testing
import orjson
import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

import api.idempotency
from api.app import Collaborators, create_app
from api.idempotency import Endpoint, Keys, canonical, idempotent
from api.middleware import SessionManager
from models import employers, idempotency
from models.core.settings import Settings
from models.db.entities import Application, IdempotencyKey, Job
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.idempotency import Scope
from tests.conftest import Account, Api, SmtpSink, migrated
from tests.factories import JOBS, entries, job_body, problem
from workers import delivery
from workers.cli import main
from workers.tasks import RUNNERS

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


# --- the key itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["", "k" * 256, "tab\there", "bell\x07", "del\x7f", "clé", "naïve-ключ"],
    ids=["empty", "256-chars", "tab", "control", "del", "latin-1", "not-latin-1"],
)
def test_a_malformed_key_is_400_and_nothing_is_done(service: Service, key: str) -> None:
    job_id = service.job()
    before = service.jobs()
    problem(service.post_job(key), 400, "invalid_idempotency_key")
    assert service.jobs() == before
    problem(service.apply(job_id, key), 400, "invalid_idempotency_key")
    assert service.applications(job_id) == []


@pytest.mark.parametrize("key", ["k" * 255, "x", " space inside ~!", '"quoted"'])
def test_a_key_of_1_to_255_printable_ascii_characters_is_taken(service: Service, key: str) -> None:
    first = service.post_job(key)
    fresh(first, 201)
    replayed(first, service.post_job(key))
    assert service.jobs() == 1


# --- replays ---------------------------------------------------------------------------------


def test_a_retried_job_post_is_replayed_byte_for_byte_and_creates_nothing(
    service: Service,
) -> None:
    first = service.post_job("job-1")
    fresh(first, 201)
    assert first.headers["location"] and first.headers["etag"]
    # The job changes since; the replay is the recorded answer all the same.
    job_id = first.json["id"]
    changed = service.api.put(f"{JOBS}/{job_id}", key=service.employer.key, json={"title": "New"})
    assert changed.status_code == 200
    again = service.post_job("job-1")
    replayed(first, again)
    assert again.json["title"] == "Senior Baker"
    assert service.jobs() == 1


def test_a_retried_application_is_replayed_and_sends_one_copy(service: Service) -> None:
    job_id = service.job()
    first = service.apply(job_id, "apply-1")
    fresh(first, 202)
    replayed(first, service.apply(job_id, "apply-1"))
    assert service.applications(job_id) == [first.json["id"]]
    assert service.enqueued == [first.json["id"]]


def test_json_is_compared_as_values(service: Service) -> None:
    body = job_body(salary={"amount": 60000, "period": {"id": 1}})
    first = service.post_job("values", json.dumps(body).encode())
    fresh(first, 201)
    reordered = dict(reversed(list(body.items())))
    reordered["salary"] = {"period": {"id": 1}, "amount": Decimal("60000.00")}
    text = json.dumps(reordered, indent=4, default=str).replace('"60000.00"', "6.0000e4")
    replayed(first, service.post_job("values", text.encode()))
    assert service.jobs() == 1


def test_query_parameters_count_in_any_order(service: Service) -> None:
    first = service.post_job("query", path=f"{JOBS}?b=2&a=1&a=3")
    fresh(first, 201)
    replayed(first, service.post_job("query", path=f"{JOBS}?a=1&b=2&a=3"))
    # All of them count: one more, or one fewer, is another request.
    for path in (f"{JOBS}?a=1&b=2", f"{JOBS}?a=1&b=2&a=3&dryRun=false", JOBS):
        problem(service.post_job("query", path=path), 422, "idempotency_key_reused")
    assert service.jobs() == 1


def test_a_multipart_application_is_compared_by_its_fields_and_files(service: Service) -> None:
    job_id = service.job()
    form = dict(APPLICANT, phone="+1 514 555 0199")
    first = service.apply(job_id, "form-1", multipart(form, ("cv.pdf", PDF)))
    fresh(first, 202)
    # Another boundary, other part headers, the parts in another order: the same request.
    again = multipart(
        dict(reversed(list(form.items()))),
        ("cv.pdf", PDF),
        boundary="AnotherBoundary42",
        part_type="text/plain; charset=utf-8",
    )
    replayed(first, service.apply(job_id, "form-1", again))
    for other in (
        multipart(form, ("cv.pdf", PDF + b"%")),  # the file's bytes
        multipart(form, ("resume.pdf", PDF)),  # its name
        multipart(dict(form, phone="+1 514 555 0100"), ("cv.pdf", PDF)),  # a value
        multipart(form),  # no file
    ):
        problem(service.apply(job_id, "form-1", other), 422, "idempotency_key_reused")
    # The same content as JSON is another request too.
    problem(service.apply(job_id, "form-1", form), 422, "idempotency_key_reused")
    assert service.applications(job_id) == [first.json["id"]]


def test_a_key_reused_for_a_different_request_is_422_without_errors(service: Service) -> None:
    fresh(service.post_job("reused"), 201)
    body = problem(
        service.post_job("reused", job_body(title="Pastry Chef")), 422, "idempotency_key_reused"
    )
    assert "errors" not in body
    job_id = service.job()
    fresh(service.apply(job_id, "reused-too"), 202)
    body = problem(
        service.apply(job_id, "reused-too", dict(APPLICANT, name="Ada")),
        422,
        "idempotency_key_reused",
    )
    assert "errors" not in body
    assert service.jobs() == 2 and len(service.applications(job_id)) == 1


# --- scopes ----------------------------------------------------------------------------------


def test_a_key_belongs_to_the_employer_for_jobs(service: Service) -> None:
    other = service.new_employer()
    fresh(service.post_job("shared"), 201)
    fresh(service.post_job("shared", account=other), 201)  # not a replay of the first
    problem(
        service.post_job("shared", job_body(title="Other"), account=other),
        422,
        "idempotency_key_reused",
    )
    assert service.jobs() == 1 and service.jobs(other) == 1


def test_a_key_belongs_to_the_job_for_applications(service: Service) -> None:
    one, two = service.job(), service.job()
    fresh(service.apply(one, "shared"), 202)
    fresh(service.apply(two, "shared"), 202)
    assert len(service.applications(one)) == len(service.applications(two)) == 1


def test_the_key_is_ignored_on_other_operations(service: Service) -> None:
    put = {"referenceId": "R-1", **job_body()}
    for _ in range(2):
        result = service.api.put(JOBS, key=service.employer.key, json=put, headers={HEADER: ""})
        assert result.status_code in (200, 201) and "idempotent-replayed" not in result.headers
    # A POST overridden as PUT is a PUT (C7): its key is not looked at either.
    override = {"X-HTTP-Method-Override": "PUT"}
    result = service.post_job("k" * 300, {**put, "title": "Baker"}, headers=override)
    assert result.status_code == 200 and result.json["title"] == "Baker"
    with service.sessions() as s:
        assert (
            s.scalar(
                select(func.count())
                .select_from(IdempotencyKey)
                .where(
                    IdempotencyKey.scope_id == service.employer.id,
                    IdempotencyKey.scope == "employer",
                )
            )
            == 0
        )


# --- the order of answers ------------------------------------------------------------------------


def test_401_and_the_body_come_before_the_keys_answers(service: Service) -> None:
    fresh(service.post_job("order"), 201)
    stranger = Account(service.employer.id, "x", "not-a-key")
    problem(service.post_job("order", account=stranger), 401, "unauthorized")
    problem(service.post_job("order", b'{"title": '), 400, "malformed_json")
    problem(
        service.post_job("order", headers={"Content-Type": "text/plain"}),
        415,
        "unsupported_media_type",
    )


def test_413_and_415_come_before_a_malformed_key_and_the_key_before_the_body(
    service: Service,
) -> None:
    big = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
    problem(service.post_job("", big), 413, "payload_too_large")
    problem(
        service.post_job("", headers={"Content-Type": "text/plain"}), 415, "unsupported_media_type"
    )
    problem(service.post_job("", b'{"title": '), 400, "invalid_idempotency_key")
    job_id = service.job()
    result = service.api.post(
        apply_path(job_id), body=b"x", headers={HEADER: "", "Content-Type": "text/plain"}
    )
    problem(result, 415, "unsupported_media_type")


def test_a_retry_is_replayed_where_a_first_try_would_now_be_refused(service: Service) -> None:
    """C10's order: the key's answers come before 429, 404, 409 and 422."""
    first = service.post_job("job", job_body(referenceId="REF-1", status="active"))
    fresh(first, 201)
    job_id = first.json["id"]
    applied = service.apply(job_id, "apply")
    fresh(applied, 202)
    archive = service.api.put(
        f"{JOBS}/{job_id}", key=service.employer.key, json={"status": "archived"}
    )
    assert archive.status_code == 200
    service.gate.wait = 30  # the applicant's address is over its limit
    replayed(applied, service.apply(job_id, "apply"))
    problem(service.apply(job_id, "another"), 429, "rate_limited")
    service.gate.wait = None
    problem(service.apply(job_id, "another"), 404, "not_found")  # archived: not open
    problem(
        service.apply(job_id, "apply", dict(APPLICANT, name="Ada")), 422, "idempotency_key_reused"
    )
    replayed(
        first, service.post_job("job", job_body(referenceId="REF-1", status="active"))
    )  # not a 409
    deleted = service.api.delete(f"{JOBS}/{job_id}", key=service.employer.key)
    assert deleted.status_code == 204
    replayed(first, service.post_job("job", job_body(referenceId="REF-1", status="active")))
    replayed(applied, service.apply(job_id, "apply"))  # the job is gone: not a 404
    assert service.applications(job_id) == [] and service.enqueued == [applied.json["id"]]


# --- failures release the key -------------------------------------------------------------


def test_a_failure_releases_the_key_and_a_retry_is_processed_afresh(service: Service) -> None:
    scope = service.employer_scope()
    problem(service.post_job("fix", job_body(title="")), 422, "validation_failed")
    assert service.key_row(scope, "fix") is None
    fresh(service.post_job("dup", job_body(referenceId="TAKEN")), 201)
    problem(service.post_job("fix", job_body(referenceId="TAKEN")), 409, "duplicate_reference_id")
    assert service.key_row(scope, "fix") is None
    service.hold.fail = True
    problem(service.post_job("fix"), 500, "internal_error")
    assert service.key_row(scope, "fix") is None
    service.hold.fail = False
    fresh(service.post_job("fix"), 201)
    row = service.key_row(scope, "fix")
    assert row is not None and row.status == 201


def test_a_refused_application_releases_the_key(service: Service) -> None:
    job_id = service.job(status="draft")
    scope = Scope("job", job_id)
    problem(service.apply(job_id, "later"), 404, "not_found")
    assert service.key_row(scope, "later") is None
    published = service.api.put(
        f"{JOBS}/{job_id}", key=service.employer.key, json={"status": "active"}
    )
    assert published.status_code == 200
    service.gate.wait = 5
    problem(service.apply(job_id, "later"), 429, "rate_limited")
    assert service.key_row(scope, "later") is None
    service.gate.wait = None
    problem(service.apply(job_id, "later", {"name": "Ada"}), 422, "validation_failed")
    assert service.key_row(scope, "later") is None
    fresh(service.apply(job_id, "later"), 202)
    assert len(service.applications(job_id)) == 1


def test_an_application_is_counted_against_the_rate_before_its_key_is_marked(
    service: Service,
) -> None:
    """C8, C10: a request over APPLY_RATE_LIMIT marks no key; one answered by its key (a
    replay) is not counted."""
    job_id = service.job()
    scope = Scope("job", job_id)
    marks: list[IdempotencyKey | None] = []
    service.gate.probe = lambda: marks.append(service.key_row(scope, "counted"))
    service.gate.wait = 30
    problem(service.apply(job_id, "counted"), 429, "rate_limited")
    assert marks == [None] and service.key_row(scope, "counted") is None
    service.gate.wait = None
    first = service.apply(job_id, "counted")
    fresh(first, 202)
    assert marks == [None, None]
    service.gate.wait = 30
    replayed(first, service.apply(job_id, "counted"))
    assert len(marks) == 2


def test_an_application_form_is_counted_against_the_rate_before_its_key_is_marked(
    service: Service,
) -> None:
    job_id = service.job()
    scope = Scope("job", job_id)
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    marks: list[IdempotencyKey | None] = []
    service.gate.probe = lambda: marks.append(service.key_row(scope, fields["idempotencyKey"]))
    service.gate.wait = 30
    assert submit(service, job_id, fields).status_code == 429
    assert marks == [None] and service.key_row(scope, fields["idempotencyKey"]) is None
    service.gate.wait = None
    assert submit(service, job_id, fields).status_code == 303
    assert marks == [None, None]


def test_a_report_form_is_counted_against_the_rate_before_its_key_is_marked(
    service: Service,
) -> None:
    job_id = service.job()
    page = service.pages.simulate_get(f"/jobs/{job_id}/report")
    assert page.status_code == 200
    [token] = TOKEN.findall(page.text)
    scope = Scope("report", job_id)
    fields = {"reason": "scam", "details": "Asks for a fee.", "idempotencyKey": token}
    marks: list[IdempotencyKey | None] = []
    service.gate.probe = lambda: marks.append(service.key_row(scope, token))
    service.gate.wait = 30
    refused = service.pages.simulate_post(f"/jobs/{job_id}/report", **multipart(fields))
    assert refused.status_code == 429
    assert marks == [None] and service.key_row(scope, token) is None
    service.gate.wait = None
    sent = service.pages.simulate_post(f"/jobs/{job_id}/report", **multipart(fields))
    assert sent.status_code == 303
    assert marks == [None, None]


def test_a_dry_run_records_nothing(service: Service) -> None:
    """C10: `?dryRun=true` with a key marks nothing and records nothing, so its retry is
    processed afresh (never replayed) and the real request after it is not a reuse."""
    dry = f"{JOBS}?dryRun=true"
    for _ in range(2):
        result = service.post_job("dry", path=dry)
        fresh(result, 200)
        assert result.json["id"] is None and "etag" not in result.headers
    assert service.key_row(service.employer_scope(), "dry") is None
    assert service.jobs() == 0
    problem(service.post_job("", path=dry), 400, "invalid_idempotency_key")  # still checked
    bad = service.post_job("dry", path=f"{JOBS}?dryRun=yes")
    assert entries(bad, 400, "invalid_query") == [("dryRun", "invalid_format")]
    real = service.post_job("dry")
    fresh(real, 201)
    replayed = service.post_job("dry")
    assert replayed.headers[api.idempotency.REPLAYED] == "true"
    assert replayed.content == real.content and service.jobs() == 1


class Answers:
    """A resource that answers what it is told without raising, as a page does: the layer
    records what it answers, not whether the responder raised."""

    def __init__(self) -> None:
        self.status, self.calls = 200, 0

    @idempotent(
        Endpoint(
            scope=lambda req, params: Scope("employer", int(params["scope_id"])),
            limit=1024,
            media_types=("application/json",),
            media_detail="Send JSON.",
        )
    )
    def on_post(self, req: falcon.Request, resp: falcon.Response, scope_id: str) -> None:
        self.calls += 1
        resp.status = self.status
        if self.status != 204:
            resp.media = {"call": self.calls}


@pytest.mark.parametrize(
    ("status", "recorded"),
    [
        (200, True),
        (201, True),
        (204, True),
        (303, True),
        (302, False),
        (400, False),
        (409, False),
        (422, False),
        (500, False),
    ],
)
def test_only_a_success_is_recorded(
    sessions: sessionmaker[Session], status: int, recorded: bool
) -> None:
    resource = Answers()
    middleware: list[Any] = [Keys(sessions, Instant()), SessionManager(sessions)]
    app = falcon.App(middleware=middleware)
    app.add_route("/answers/{scope_id}", resource)
    client = falcon.testing.TestClient(app)
    path = f"/answers/{secrets.randbelow(2**31)}"
    resource.status = status
    first = client.simulate_post(path, json={"a": 1}, headers={HEADER: "k"})
    again = client.simulate_post(path, json={"a": 1}, headers={HEADER: "k"})
    assert resource.calls == (1 if recorded else 2)
    if recorded:
        replayed(first, again)


# --- in flight, leases and age --------------------------------------------------------------


def test_a_retry_while_the_first_application_is_processed_is_409(service: Service) -> None:
    job_id = service.job()
    service.marked.arm()
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(service.apply, job_id, "busy")
        assert service.marked.reached.wait(30)
        busy = service.apply(job_id, "busy")
        problem(busy, 409, "idempotency_key_in_use")
        assert busy.headers["retry-after"] == "1"
        service.marked.released.set()
        done = first.result(30)
    fresh(done, 202)
    replayed(done, service.apply(job_id, "busy"))
    assert service.applications(job_id) == [done.json["id"]]


def test_a_retry_while_the_first_job_post_is_processed(service: Service) -> None:
    """On PostgreSQL the retry is told 409. A SQLite writer holds the database from its API
    key check to its commit (models.db.unit_of_work), so there the retry waits, then is replayed."""
    service.hold.arm()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(service.post_job, "busy")
        assert service.hold.reached.wait(30)
        retry: Future[falcon.testing.Result] = pool.submit(service.post_job, "busy")
        if service.backend == "postgresql":
            busy = retry.result(30)
            problem(busy, 409, "idempotency_key_in_use")
            assert busy.headers["retry-after"] == "1"
        else:
            time.sleep(0.5)
            assert not retry.done()
        service.hold.released.set()
        done = first.result(30)
        fresh(done, 201)
        if service.backend == "sqlite":
            replayed(done, retry.result(30))
    replayed(done, service.post_job("busy"))
    assert service.jobs() == 1


def test_a_dead_processs_mark_lapses_with_its_lease(service: Service) -> None:
    scope = service.employer_scope()
    with session_scope(service.sessions) as s:  # marked, then never finished
        held = idempotency.claim(s, scope, "orphan", "0" * 64, service.instant())
    assert isinstance(held, idempotency.Claim)
    problem(service.post_job("orphan"), 409, "idempotency_key_in_use")
    service.instant.advance(seconds=59)
    problem(service.post_job("orphan"), 409, "idempotency_key_in_use")
    service.instant.advance(seconds=1)
    first = service.post_job("orphan")
    fresh(first, 201)
    replayed(first, service.post_job("orphan"))
    assert service.jobs() == 1
    with session_scope(service.sessions) as s:  # the dead holder can record nothing now
        response = idempotency.Recorded(201, None, None, None, b"{}")
        assert not idempotency.record(s, held, response)


def test_a_request_that_outlives_its_lease_undoes_its_work(service: Service) -> None:
    """The first request is held past its lease; a retry takes the key and applies. The
    first cannot record its answer then: it is 409, and its application is rolled back."""
    job_id = service.job()
    service.marked.arm()
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(service.apply, job_id, "slow")
        assert service.marked.reached.wait(30)
        service.instant.advance(seconds=61)
        second = service.apply(job_id, "slow")
        fresh(second, 202)
        service.marked.released.set()
        late = first.result(30)
    problem(late, 409, "idempotency_key_in_use")
    replayed(second, service.apply(job_id, "slow"))
    assert service.applications(job_id) == [second.json["id"]]
    assert service.enqueued == [second.json["id"]]


def test_a_recorded_key_lives_24_hours_from_its_first_use(service: Service) -> None:
    first = service.post_job("day")
    fresh(first, 201)
    service.instant.advance(hours=24, seconds=-1)
    replayed(first, service.post_job("day"))
    problem(service.post_job("day", job_body(title="Other")), 422, "idempotency_key_reused")
    service.instant.advance(seconds=1)  # 24 hours since the first use
    second = service.post_job("day", job_body(title="Other"))
    fresh(second, 201)
    assert second.json["id"] != first.json["id"] and service.jobs() == 2
    replayed(second, service.post_job("day", job_body(title="Other")))


def test_the_daily_purge_deletes_the_keys_past_their_24_hours(
    service: Service, settings: Settings
) -> None:
    """beat's purge task and `jobpost tasks run purge` (C9, C14) run this."""
    scope = service.employer_scope()
    service.instant.advance(hours=-25)
    fresh(service.post_job("old"), 201)
    service.instant.advance(hours=2)
    fresh(service.post_job("young"), 201)
    assert RUNNERS["purge"](service.sessions, settings) == 1
    assert service.key_row(scope, "old") is None
    assert service.key_row(scope, "young") is not None


def test_jobpost_tasks_run_purge_counts_the_keys(
    service: Service, database: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    service.instant.advance(hours=-30)
    fresh(service.post_job("old"), 201)
    fresh(service.post_job("older", job_body(title="Older")), 201)
    monkeypatch.setenv("DATABASE_URL", database.url.render_as_string(hide_password=False))
    monkeypatch.setenv("JOBPOST_VAR_DIR", str(tmp_path))
    assert main(["tasks", "run", "purge", "--json"]) == 0  # it closes its own engine
    assert orjson.loads(capsys.readouterr().out) == {"task": "purge", "changed": 2}
    assert service.key_row(service.employer_scope(), "old") is None


# --- concurrent first uses -------------------------------------------------------------------


def test_concurrent_first_uses_of_a_key_make_one_job(service: Service) -> None:
    results = in_parallel(THREADS, lambda: service.post_job("race"))
    assert service.jobs() == 1
    made = [r for r in results if r.status_code == 201 and "idempotent-replayed" not in r.headers]
    assert len(made) == 1
    for result in results:
        if result.status_code == 409:
            problem(result, 409, "idempotency_key_in_use")
        elif result is not made[0]:
            replayed(made[0], result)


def test_concurrent_first_uses_of_a_key_make_one_application_and_one_copy(
    service: Service, settings: Settings, smtp_sink: SmtpSink
) -> None:
    job_id = service.job()
    results = in_parallel(THREADS, lambda: service.apply(job_id, "race"))
    [application] = service.applications(job_id)
    assert {r.status_code for r in results} <= {202, 409}
    assert [r.json["id"] for r in results if r.status_code == 202] == [application] * sum(
        r.status_code == 202 for r in results
    )
    assert service.enqueued == [application]
    mail = dataclasses.replace(settings, smtp_host=smtp_sink.host, smtp_port=smtp_sink.port)
    assert delivery.deliver(service.sessions, mail, application) == "sent"
    assert len(smtp_sink.messages) == 1


# --- the public form's one-time token --------------------------------------------------------


def form_token(service: Service, job_id: int) -> str:
    page = service.pages.simulate_get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert page.headers["cache-control"] == "private, no-cache"  # the token is this visitor's
    [token] = TOKEN.findall(page.text)
    return str(token)


def submit(service: Service, job_id: int, fields: dict[str, str]) -> falcon.testing.Result:
    return service.pages.simulate_post(f"/jobs/{job_id}/apply", **multipart(fields))


def test_each_view_of_the_form_has_its_own_token(service: Service) -> None:
    job_id = service.job()
    one, two = form_token(service, job_id), form_token(service, job_id)
    assert one != two and len(one) >= 22
    url_job = service.job(applicantRoutingType={"id": 2}, applicationUrl="https://maple.test/a")
    page = service.pages.simulate_get(f"/jobs/{url_job}")
    assert not TOKEN.findall(page.text) and "cache-control" not in page.headers


def test_a_double_submit_of_the_form_makes_one_application(service: Service) -> None:
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    first = submit(service, job_id, fields)
    assert (
        first.status_code == 303 and first.headers["location"] == f"/jobs/{job_id}/applied?lang=en"
    )
    replayed(first, submit(service, job_id, fields))
    assert len(service.applications(job_id)) == 1 and len(service.enqueued) == 1
    # Sent back with other answers (the page kept in the browser's history): not applied.
    again = submit(service, job_id, {**fields, "coverLetter": "Another letter."})
    assert again.status_code == 422 and "This form was sent already" in again.text
    # A new view of the form applies again.
    fresh(submit(service, job_id, {**fields, "idempotencyKey": form_token(service, job_id)}), 303)
    assert len(service.applications(job_id)) == 2


def test_concurrent_submits_of_the_form_make_one_application(service: Service) -> None:
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    results = in_parallel(THREADS, lambda: submit(service, job_id, fields))
    assert {r.status_code for r in results} <= {303, 409}
    for result in results:
        if result.status_code == 409:
            assert result.headers["retry-after"] == "1"
            assert "Your application is being sent" in result.text
    assert len(service.applications(job_id)) == 1 and len(service.enqueued) == 1


def test_a_form_sent_back_with_errors_keeps_its_token_and_then_applies_once(
    service: Service,
) -> None:
    job_id = service.job()
    token = form_token(service, job_id)
    invalid = submit(service, job_id, {**APPLICANT, "email": "nope", "idempotencyKey": token})
    assert invalid.status_code == 422 and TOKEN.findall(invalid.text) == [token]
    fields = {**APPLICANT, "idempotencyKey": token}
    first = submit(service, job_id, fields)
    assert first.status_code == 303
    replayed(first, submit(service, job_id, fields))
    assert len(service.applications(job_id)) == 1


def test_a_form_without_a_token_or_with_a_malformed_one(service: Service) -> None:
    job_id = service.job()
    for _ in range(2):  # a page from before the tokens: as before, each submit applies
        fresh(submit(service, job_id, APPLICANT), 303)
    assert len(service.applications(job_id)) == 2
    bad = submit(service, job_id, {**APPLICANT, "idempotencyKey": "k" * 256})
    assert bad.status_code == 400 and "The form could not be read" in bad.text
    assert len(service.applications(job_id)) == 2


def test_a_form_that_cannot_be_read_counts_against_the_rate_first(service: Service) -> None:
    """C1's order without a key: 429 before 400. The form is read before its token is known,
    so an unreadable one is checked against the rate first; a readable one is answered by
    its key before the rate (C10)."""
    job_id = service.job()
    fields = {**APPLICANT, "idempotencyKey": form_token(service, job_id)}
    first = submit(service, job_id, fields)
    assert first.status_code == 303
    service.gate.wait = 30
    unreadable = service.pages.simulate_post(
        f"/jobs/{job_id}/apply",
        body=b"no parts here",
        headers={"Content-Type": "multipart/form-data; boundary=nothing"},
    )
    assert unreadable.status_code == 429 and unreadable.headers["retry-after"] == "30"
    replayed(first, submit(service, job_id, fields))
    assert submit(service, job_id, APPLICANT).status_code == 429  # no token: no key


# --- the canonical form -----------------------------------------------------------------------


def test_the_canonical_form_compares_json_as_values() -> None:
    assert canonical({"b": [1, "é"], "a": None}) == canonical({"a": None, "b": [1, "é"]})
    numbers = [1, Decimal("1.0"), Decimal("1e0"), Decimal("0.10e1")]
    assert len({canonical(n) for n in numbers}) == 1
    assert canonical(Decimal("1.5")) == canonical(Decimal("1.50")) != canonical(Decimal("1.05"))
    assert canonical(Decimal("-0.0")) == canonical(0)
    assert canonical(True) != canonical(1)
    assert canonical(10**40) != canonical(10**40 + 1)
    exact = Decimal("1.00000000000000000000000000000001")  # past the default precision
    assert canonical(exact) != canonical(1)
    assert len(canonical(Decimal("1e999999999"))) < 20  # never written out digit by digit
