"""C9 in process: X-Request-ID, the JSON access log, /healthz, /readyz and /metrics.

The metrics here live in this process's default registry (no PROMETHEUS_MULTIPROC_DIR), so
counters are compared before and after; tests/workers/test_operations.py reads them through
two gunicorn workers.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import falcon
import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, update
from sqlalchemy.orm import Session, sessionmaker

from api import health, ratelimit
from api.app import Collaborators, create_app
from models import reports
from models.alerts import mails as alert_mails
from models.alerts import subscriptions as alerts
from models.applications import bounces
from models.core import logs
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import Application, OutboxEntry, WebhookDelivery, WebhookEndpoint
from models.jobs.feeds import Filters
from tests.api.applying import apply, received
from tests.conftest import Api, nowhere_url
from tests.factories import create_job, problem
from tests.models.applications.test_bounces import FAILED, dsn

API = "/api/v1.1"
RFC3339_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
ACCESS_FIELDS = {
    "time",
    "level",
    "event",
    "request_id",
    "employer_id",
    "method",
    "route",
    "status",
    "duration_ms",
}


def build(settings: Settings, sessions: sessionmaker[Session], clock: Any, **parts: Any) -> Api:
    parts.setdefault("limiter", ratelimit.Unlimited())
    return Api(create_app(settings, sessions, Collaborators(**parts), today=clock))


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called `name` of a Prometheus text page, by their sorted labels."""
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    return samples(text, name).get(tuple(sorted(labels.items())), 0.0)


def scrape(api: Api) -> str:
    result = api.get("/metrics")
    assert result.status_code == 200, result.text
    assert result.headers["content-type"].startswith("text/plain; version=0.0.4")
    return result.text


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The access records caught, each formatted as the JSON line it becomes on stderr."""
    formatter = logs.JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == "jobpost.access"]


# --- X-Request-ID -------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["abc", "A-Z.a_z-0.9", "x" * 64, "0"])
def test_a_well_formed_request_id_is_honoured_and_echoed(api: Api, given: str) -> None:
    result = api.get("/healthz", headers={"X-Request-ID": given})
    assert result.headers["x-request-id"] == given


@pytest.mark.parametrize("given", ["x" * 65, "has space", "a/b", "semi;colon", "", "é"])
def test_a_malformed_request_id_is_replaced(api: Api, given: str) -> None:
    result = api.get("/healthz", headers={"X-Request-ID": given})
    echoed = result.headers["x-request-id"]
    assert echoed != given and REQUEST_ID.fullmatch(echoed)


def test_without_a_request_id_each_request_gets_its_own(api: Api) -> None:
    first, second = (api.get("/healthz").headers["x-request-id"] for _ in range(2))
    assert REQUEST_ID.fullmatch(first) and REQUEST_ID.fullmatch(second) and first != second


def test_an_error_answer_echoes_the_request_id_too(api: Api) -> None:
    result = api.get(f"{API}/jobs", headers={"X-Request-ID": "err-1"})
    problem(result, 401, "unauthorized")
    assert result.headers["x-request-id"] == "err-1"


# --- the access log ------------------------------------------------------------------------------


def test_one_json_line_per_request_with_every_field(
    api: Api, employer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    job = create_job(api, employer)
    caplog.set_level(logging.INFO, logger="jobpost.access")
    caplog.clear()
    api.get(f"{API}/jobs/{job['id']}", key=employer.key, headers={"X-Request-ID": "read-1"})
    api.get(f"{API}/jobs/{job['id']}", headers={"X-Request-ID": "anon-1"})
    api.client.simulate_get("/no/such/page", headers={"X-Request-ID": "lost-1"})  # undocumented
    lines = access_lines(caplog)
    assert [line["request_id"] for line in lines] == ["read-1", "anon-1", "lost-1"]
    for line in lines:
        assert set(line) >= ACCESS_FIELDS, line
        assert RFC3339_UTC.fullmatch(line["time"]), line["time"]
        assert line["event"] == "request" and line["level"] == "info" and line["method"] == "GET"
        assert isinstance(line["status"], int)
        assert isinstance(line["duration_ms"], int | float) and line["duration_ms"] >= 0
    read, anon, lost = lines
    assert (read["route"], read["status"], read["employer_id"]) == (
        f"{API}/jobs/{{job_id}}",
        200,
        employer.id,
    )
    assert (anon["route"], anon["status"], anon["employer_id"]) == (
        f"{API}/jobs/{{job_id}}",
        401,
        None,
    )
    assert (lost["route"], lost["status"], lost["employer_id"]) == ("unmatched", 404, None)


def test_a_server_error_is_logged_at_error_level_with_its_request_id(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    app = create_app(settings, sessions, Collaborators(ready_checks={"broker": broken}))
    app.add_route("/boom", Boom())
    caplog.set_level(logging.INFO)
    result = falcon.testing.TestClient(app).simulate_get("/boom", headers={"X-Request-ID": "b-1"})
    assert result.status_code == 500
    formatter = logs.JsonFormatter()
    lines = [json.loads(formatter.format(r)) for r in caplog.records]
    [unhandled] = [line for line in lines if line["event"] == "unhandled error"]
    assert unhandled["request_id"] == "b-1" and "RuntimeError: boom" in unhandled["exception"]
    [access] = [line for line in lines if line["event"] == "request"]
    assert (access["status"], access["level"], access["route"]) == (500, "error", "/boom")


class Boom:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise RuntimeError("boom")


def test_configure_writes_json_lines_to_stderr_once(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        logs.configure()
        logs.configure()  # idempotent: one handler, one line per record
        with logs.bound(request_id="ctx-1"):
            logging.getLogger("jobpost.test").warning("hello %s", "you", extra={"n": 3})
    finally:
        for handler in list(root.handlers):
            if handler not in before:
                root.removeHandler(handler)
        root.setLevel(level)
    [line] = [json.loads(raw) for raw in stream.getvalue().splitlines()]
    assert RFC3339_UTC.fullmatch(line["time"])
    assert line == {
        "time": line["time"],
        "level": "warning",
        "event": "hello you",
        "logger": "jobpost.test",
        "request_id": "ctx-1",
        "n": 3,
    }


# --- /healthz and /readyz ------------------------------------------------------------------------


def nowhere() -> sessionmaker[Session]:
    """Sessions on a database that refuses every connection."""
    engine = create_engine(nowhere_url(9, "connect_timeout=1"))
    return sessionmaker(engine)


def test_healthz_answers_without_touching_the_database(settings: Settings, clock: Any) -> None:
    api = build(settings, nowhere(), clock)
    result = api.get("/healthz")
    assert (result.status_code, result.json) == (200, {"status": "ok"})


def test_readyz_is_ok_when_every_check_answers(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    calls: list[str] = []
    checks: dict[str, health.Check] = {
        "database": lambda: calls.append("database"),
        "broker": lambda: calls.append("broker"),
    }
    result = build(settings, sessions, clock, ready_checks=checks).get("/readyz")
    assert (result.status_code, result.json) == (200, {"status": "ok"})
    assert sorted(calls) == ["broker", "database"]


def test_readyz_is_503_naming_the_broker_that_fails(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    def refused() -> None:
        raise ConnectionRefusedError("no broker")

    api = build(
        settings, sessions, clock, ready_checks={"database": lambda: None, "broker": refused}
    )
    body = problem(api.get("/readyz"), 503, "not_ready")
    assert "broker" in body["detail"] and "database" not in body["detail"]


def test_readyz_is_503_when_the_broker_does_not_answer_in_time(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    quick = dataclasses.replace(settings, ready_timeout_seconds=0.2)
    checks: dict[str, health.Check] = {"database": lambda: None, "broker": lambda: time.sleep(2)}
    api = build(quick, sessions, clock, ready_checks=checks)
    started = time.monotonic()
    body = problem(api.get("/readyz"), 503, "not_ready")
    assert time.monotonic() - started < 1.5
    assert "broker" in body["detail"] and "0.2" in body["detail"]


def test_readyz_still_names_only_the_database_after_many_probes_of_a_silent_one(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    """A load balancer probes every second or so; a silent database holds each check's thread
    for its connect timeout. The broker, which answers, is never named."""
    silent = threading.Event()
    # Long enough that the broker's instant check finishes on a loaded machine too.
    quick = dataclasses.replace(settings, ready_timeout_seconds=0.5)
    checks: dict[str, health.Check] = {"database": silent.wait, "broker": lambda: None}
    api = build(quick, sessions, clock, ready_checks=checks)
    try:
        details = [problem(api.get("/readyz"), 503, "not_ready")["detail"] for _ in range(8)]
    finally:
        silent.set()
    assert set(details) == {"Not ready: database (no answer within 0.5 s)."}


def test_readyz_names_the_database_when_it_is_down(settings: Settings, clock: Any) -> None:
    engine = nowhere().kw["bind"]
    api = build(
        settings,
        nowhere(),
        clock,
        ready_checks={"database": health.database_check(engine), "broker": lambda: None},
    )
    body = problem(api.get("/readyz"), 503, "not_ready")
    assert "database" in body["detail"] and "broker" not in body["detail"]


# --- /metrics ------------------------------------------------------------------------------------


def test_request_metrics_are_labelled_by_route_template_not_path(api: Api, employer: Any) -> None:
    job = create_job(api, employer)
    route = f"{API}/jobs/{{job_id}}"
    before = scrape(api)
    for _ in range(3):
        assert api.get(f"{API}/jobs/{job['id']}", key=employer.key).status_code == 200
    problem(api.get(f"{API}/jobs/987654", key=employer.key), 404, "not_found")
    api.client.simulate_get("/no/such/page")  # no route: not in openapi.json either
    after = scrape(api)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("http_requests_total", method="GET", route=route, status="200") == 3
    assert delta("http_requests_total", method="GET", route=route, status="404") == 1
    assert delta("http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert delta("http_request_duration_seconds_count", method="GET", route=route) == 4
    assert delta("http_request_duration_seconds_bucket", method="GET", route=route, le="+Inf") == 4
    routes = {dict(labels)["route"] for labels in samples(after, "http_requests_total")}
    assert not [r for r in routes if any(part.isdigit() for part in r.split("/"))], routes
    labels = {
        label
        for family in text_string_to_metric_families(after)
        for sample in family.samples
        for label in sample.labels.values()
    }
    assert not [v for v in labels if "987654" in v or "/no/such/page" in v], labels


def test_report_metrics_count_reports_and_their_emails_by_status(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    """C13: `jobpost_job_reports{status}`, and the operator's emails as the copies'."""
    told = dataclasses.replace(settings, reports_email="trust@example.com")
    api = build(told, sessions, clock)
    empty = scrape(api)
    assert samples(empty, "jobpost_job_reports") == {
        (("status", s),): 0 for s in ("open", "dismissed", "taken_down")
    }
    ids = []
    for _ in range(3):
        job = create_job(api, employer, status="active")
        sent = api.post(f"{API}/jobs/{job['id']}/reports", json={"reason": "scam", "details": "x"})
        assert sent.status_code == 202, sent.text
        ids.append(sent.json["id"])
    with sessions() as s:
        reports.resolve(s, ids[0], take_down=True, note=None)
        reports.resolve(s, ids[1], take_down=False, note="fine")
        s.commit()
    text = scrape(api)
    assert samples(text, "jobpost_job_reports") == {
        (("status", "open"),): 1,
        (("status", "dismissed"),): 1,
        (("status", "taken_down"),): 1,
    }
    assert value(text, "jobpost_report_mails", status="pending") == 3
    assert value(text, "jobpost_report_mails", status="sent") == 0


def test_alert_mail_metrics_count_them_by_kind_and_status(
    settings: Settings, sessions: sessionmaker[Session], clock: Any
) -> None:
    """C19: `jobpost_alert_mails{kind,status}`, every kind and status named."""
    api = build(settings, sessions, clock)
    empty = samples(scrape(api), "jobpost_alert_mails")
    assert set(empty.values()) == {0} and len(empty) == 2 * 4
    with sessions() as s:
        made = alerts.sign_up(s, "ada@example.com", "daily", "en", Filters(), now=utcnow())
        alert_mails.queue_confirmation(s, made.subscription, now=utcnow())
        s.commit()
    text = scrape(api)
    assert value(text, "jobpost_alert_mails", kind="confirm", status="pending") == 1
    assert value(text, "jobpost_alert_mails", kind="digest", status="pending") == 0


def test_bounces_count_by_reason_and_drops_by_theirs(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    """C22: every reason is named (0 when none), so a rate over it is never absent."""
    api = build(settings, sessions, clock)
    job = create_job(api, employer, status="active")
    app_id = received(apply(api, job["id"]))
    [notice] = bounces.notices(dsn(FAILED.replace("jobs@upkeep.test", "jobs@maple.test")))
    with sessions() as s:
        s.execute(
            update(OutboxEntry).where(OutboxEntry.application_id == app_id).values(status="sent")
        )
        bounces.take(s, app_id, notice, now=utcnow())
        bounces.drop(s, "forged", now=utcnow())
        s.commit()
    text = scrape(api)
    assert value(text, "jobpost_bounces", permanent="true", reason="mailbox_unknown") == 1
    assert value(text, "jobpost_bounces", permanent="false", reason="mailbox_unknown") == 0
    assert len(samples(text, "jobpost_bounces")) == 2 * len(bounces.REASONS)
    assert value(text, "jobpost_bounces_dropped", reason="forged") == 1
    assert len(samples(text, "jobpost_bounces_dropped")) == len(bounces.DROP_REASONS)
    assert value(text, "jobpost_outbox_entries", status="undeliverable") == 1
    assert value(text, "jobpost_address_notices", status="pending") == 0


def test_outbox_metrics_reflect_a_pending_application(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    api = build(settings, sessions, clock, queue_depths=lambda: {"email": 3, "maintenance": 0})
    job = create_job(api, employer, status="active")
    empty = scrape(api)
    assert value(empty, "jobpost_outbox_entries", status="pending") == 0
    assert value(empty, "jobpost_outbox_oldest_pending_seconds") == 0
    posted = api.post(
        f"{API}/jobs/{job['id']}/applications",
        json={"name": "Ana Silva", "email": "ana@example.org"},
    )
    assert posted.status_code == 202, posted.text
    with sessions() as s:  # it arrived ten minutes ago
        s.execute(
            update(Application)
            .where(Application.id == posted.json["id"])
            .values(received_at=utcnow() - timedelta(minutes=10))
        )
        s.commit()
    text = scrape(api)
    assert samples(text, "jobpost_outbox_entries") == {
        (("status", "pending"),): 1,
        (("status", "sending"),): 0,
        (("status", "sent"),): 0,
        (("status", "failed"),): 0,
        (("status", "undeliverable"),): 0,
    }
    assert 600 <= value(text, "jobpost_outbox_oldest_pending_seconds") < 700
    assert value(text, "jobpost_queue_length", queue="email") == 3
    assert value(text, "jobpost_queue_length", queue="maintenance") == 0
    assert value(text, "jobpost_metrics_source_up", source="database") == 1
    assert value(text, "jobpost_metrics_source_up", source="broker") == 1


def test_webhook_metrics_reflect_a_pending_delivery(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    """C12: deliveries by status, and the age of the oldest one not finished."""
    api = build(settings, sessions, clock)
    job = create_job(api, employer, status="active")
    empty = scrape(api)
    assert value(empty, "jobpost_webhook_deliveries", status="pending") == 0
    assert value(empty, "jobpost_webhook_oldest_pending_seconds") == 0
    with sessions() as s:
        hook = WebhookEndpoint(
            employer_id=employer.id,
            url="https://hooks.example/x",
            events='["*"]',
            status="enabled",
            secret="sealed",
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        s.add(hook)
        s.commit()
    posted = api.post(
        f"{API}/jobs/{job['id']}/applications",
        json={"name": "Ana Silva", "email": "ana@example.org"},
    )
    assert posted.status_code == 202, posted.text
    with sessions() as s:  # made ten minutes ago
        s.execute(update(WebhookDelivery).values(created_at=utcnow() - timedelta(minutes=10)))
        s.commit()
    text = scrape(api)
    assert samples(text, "jobpost_webhook_deliveries") == {
        (("status", "pending"),): 1,
        (("status", "sending"),): 0,
        (("status", "succeeded"),): 0,
        (("status", "failed"),): 0,
        (("status", "cancelled"),): 0,
    }
    assert 600 <= value(text, "jobpost_webhook_oldest_pending_seconds") < 700


def slow_depths() -> dict[str, int]:
    time.sleep(2)
    return {"email": 1}


def refused_depths() -> dict[str, int]:
    raise ConnectionRefusedError("broker down")


@pytest.mark.parametrize("depths", [refused_depths, slow_depths], ids=["refused", "too-slow"])
def test_a_broker_that_fails_leaves_the_rest_of_the_scrape(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
    depths: Callable[[], dict[str, int]],
) -> None:
    quick = dataclasses.replace(settings, ready_timeout_seconds=0.2)
    api = build(quick, sessions, clock, queue_depths=depths)
    started = time.monotonic()
    text = scrape(api)
    assert time.monotonic() - started < 1.5
    assert samples(text, "jobpost_queue_length") == {}
    assert value(text, "jobpost_metrics_source_up", source="broker") == 0
    assert value(text, "jobpost_metrics_source_up", source="database") == 1
    assert samples(text, "jobpost_outbox_entries")
    assert "http_requests_total" in text


@pytest.fixture
def silent_database(silent_port: int) -> Iterator[sessionmaker[Session]]:
    engine = create_engine(nowhere_url(silent_port))
    yield sessionmaker(engine)
    engine.dispose()


def test_a_database_that_does_not_answer_costs_the_scrape_its_timeout_only(
    settings: Settings, clock: Any, silent_database: sessionmaker[Session]
) -> None:
    """C9 (docs/operations.md: READY_TIMEOUT_SECONDS bounds each source of a scrape): the
    scrape answers in about the timeout, the database marked down, the broker's figures and
    the rest kept."""
    quick = dataclasses.replace(settings, ready_timeout_seconds=0.5)
    api = build(quick, silent_database, clock, queue_depths=lambda: {"email": 2})
    started = time.monotonic()
    text = scrape(api)
    assert time.monotonic() - started < 2.5
    assert value(text, "jobpost_metrics_source_up", source="database") == 0
    assert samples(text, "jobpost_outbox_entries") == {}
    assert value(text, "jobpost_queue_length", queue="email") == 2
    assert "http_requests_total" in text


def test_a_database_that_fails_leaves_the_rest_of_the_scrape(
    settings: Settings, clock: Any
) -> None:
    api = build(settings, nowhere(), clock, queue_depths=lambda: {"email": 2})
    text = scrape(api)
    assert value(text, "jobpost_metrics_source_up", source="database") == 0
    assert samples(text, "jobpost_outbox_entries") == {}
    assert value(text, "jobpost_queue_length", queue="email") == 2
