"""Idempotency-Key (C10) on committed databases of this module's own (SQLite and PostgreSQL): a
key is marked in a transaction of its own, which the suite's rolled-back test transaction
could not show. A failure releases it, a retry in flight is 409, a dead process's mark lapses
with its lease, a recorded key lives 24 hours, and concurrent first uses run on real threads."""

from __future__ import annotations

import dataclasses
import secrets
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import falcon.testing
import orjson
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

import api.idempotency
from api.idempotency import Endpoint, Keys, idempotent
from api.middleware import SessionManager
from models import idempotency
from models.core.settings import Settings
from models.db.entities import IdempotencyKey
from models.db.unit_of_work import session_scope
from models.idempotency import Scope
from tests.api.idempotency_service import (
    APPLICANT,
    HEADER,
    THREADS,
    TOKEN,
    Instant,
    Service,
    form_token,
    fresh,
    in_parallel,
    multipart,
    replayed,
    submit,
)
from tests.api.idempotency_service import database as database
from tests.api.idempotency_service import service as service
from tests.api.idempotency_service import sessions as sessions
from tests.conftest import SmtpSink
from tests.factories import JOBS, entries, job_body, problem
from workers import delivery
from workers.cli import main
from workers.tasks import RUNNERS

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
