"""C0 and C1 control characters (U+0000 to U+001F, U+007F to U+009F) in a one-line field
are a 422 validation_failed entry naming the field, on every path: the API's jobs,
applications, reports, webhooks and sync items, and the HTML forms. Multi-line fields
(description, coverLetter, details) keep their tabs and line breaks (C4, C8, C11, C12, C13)."""

from __future__ import annotations

import dataclasses
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, create_app
from models.core.settings import Settings
from models.db.entities import Application, JobReport, SyncItem, WebhookEndpoint
from models.webhooks import endpoints as webhooks
from tests.api.test_pages import multipart
from tests.api.test_syncs import item, items_of, run_it
from tests.conftest import Account, Api, CheckedClient, Clock
from tests.factories import JOBS, create_job, entries, job_body

V = "/api/v1.1"
APPLICANT = {"name": "Ann Baker", "email": "ann@example.org"}
REPORT = {"reason": "scam", "details": "Asks for a fee.", "email": "ann@example.org"}
# One of each kind: C0 (a line break, a tab, ESC, the unit separator inside), DEL and C1.
CONTROLS = ["\n", "\r", "\t", "\x1b", "\x1f", "\x7f", "\x85", "\x9f"]
IDS = ["lf", "cr", "tab", "esc", "us", "del", "nel", "apc"]


@dataclasses.dataclass
class Service:
    api: Api
    pages: falcon.testing.TestClient
    sessions: sessionmaker[Session]


@pytest.fixture
def service(settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> Service:
    """No rate limit (tests/api/test_rate_limit.py has it); webhooks resolve one host."""
    settings = dataclasses.replace(settings, secret_key="x" * 43 + "=")
    policy = webhooks.UrlPolicy(False, False, lambda host, port, timeout: ["93.184.215.14"])
    parts = Collaborators(limiter=ratelimit.Unlimited(), url_policy=policy)
    app = create_app(settings, sessions, parts, today=clock)
    return Service(Api(app), CheckedClient(app), sessions)


def inside(text: str, control: str) -> str:
    """`control` within `text`, where trimming cannot take it away."""
    return text[:2] + control + text[2:]


@pytest.mark.parametrize("control", CONTROLS, ids=IDS)
@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("title", lambda c: {"title": inside("Baker", c)}),
        ("referenceId", lambda c: {"referenceId": inside("REF-1", c)}),
        (
            "locations[0].description",
            lambda c: {"locations": [{"description": inside("Toronto, ON", c)}]},
        ),
        ("applicationEmail", lambda c: {"applicationEmail": inside("jobs@maple.test", c)}),
        (
            "translation.title",
            lambda c: {
                "language": "en",
                "translation": {"title": inside("Boulanger", c), "description": "<p>Pain.</p>"},
            },
        ),
    ],
)
def test_a_control_character_in_a_one_line_job_field_is_a_422_naming_it(
    service: Service, employer: Account, field: str, body: Any, control: str
) -> None:
    result = service.api.post(JOBS, json=job_body(**body(control)), key=employer.key)
    assert (field, "invalid_format") in entries(result), result.text


def test_a_job_description_keeps_its_tabs_and_line_breaks(
    service: Service, employer: Account
) -> None:
    text = "<p>Knead\tthe dough,\nthen bake.</p>\r\n<p>Twice.</p>"
    job = create_job(service.api, employer, description=text)
    assert "\t" in job["description"] and "\n" in job["description"]


@pytest.mark.parametrize("control", CONTROLS, ids=IDS)
@pytest.mark.parametrize("field", ["name", "email", "phone"])
def test_a_control_character_in_an_application_field_is_a_422_naming_it(
    service: Service, employer: Account, field: str, control: str
) -> None:
    job = create_job(service.api, employer, status="active")
    sent = {**APPLICANT, "phone": "416 555 0100"}
    sent[field] = inside(sent[field], control)
    result = service.api.post(f"{V}/jobs/{job['id']}/applications", json=sent)
    assert entries(result) == [(field, "invalid_format")]
    with service.sessions() as s:
        assert s.scalars(select(Application)).all() == []


def test_a_cover_letter_keeps_its_tabs_and_line_breaks(service: Service, employer: Account) -> None:
    job = create_job(service.api, employer, status="active")
    letter = "Dear Maple,\n\n\tI bake.\r\nAnn"
    sent = {**APPLICANT, "coverLetter": letter}
    result = service.api.post(f"{V}/jobs/{job['id']}/applications", json=sent)
    assert result.status_code == 202, result.text
    with service.sessions() as s:
        assert s.scalars(select(Application.cover_letter)).one() == letter


def test_the_application_form_refuses_a_control_character_in_the_name(
    service: Service, employer: Account
) -> None:
    job = create_job(service.api, employer, status="active")
    fields = {**APPLICANT, "name": "Ann\x1bBaker", "coverLetter": "Hello,\n\tAnn"}
    page = service.pages.simulate_post(f"/jobs/{job['id']}/apply", **multipart(fields))
    assert page.status_code == 422, page.text
    with service.sessions() as s:
        assert s.scalars(select(Application)).all() == []
    fields["name"] = "Ann Baker"
    page = service.pages.simulate_post(f"/jobs/{job['id']}/apply", **multipart(fields))
    assert page.status_code == 303, page.text
    with service.sessions() as s:
        assert s.scalars(select(Application.cover_letter)).one() == "Hello,\n\tAnn"


@pytest.mark.parametrize("control", ["\n", "\x00", "\x85"], ids=["lf", "nul", "nel"])
def test_a_control_character_in_a_report_email_is_a_422_and_details_keep_lines(
    service: Service, employer: Account, control: str
) -> None:
    job = create_job(service.api, employer, status="active")
    path = f"{JOBS}/{job['id']}/reports"
    bad = {**REPORT, "email": inside(REPORT["email"], control)}
    assert entries(service.api.post(path, json=bad)) == [("email", "invalid_format")]
    good = {**REPORT, "details": "It asks\tfor a fee,\nthen for more."}
    assert service.api.post(path, json=good).status_code == 202
    with service.sessions() as s:
        assert s.scalars(select(JobReport.details)).one() == good["details"]


@pytest.mark.parametrize("control", CONTROLS, ids=IDS)
def test_a_control_character_in_a_webhook_description_is_a_422(
    service: Service, employer: Account, control: str
) -> None:
    body = {"url": "https://hooks.example.com/a", "events": ["*"], "description": "a" + control}
    result = service.api.post(f"{V}/webhooks", json=body, key=employer.key)
    assert entries(result) == [("description", "invalid_format")]
    with service.sessions() as s:
        assert s.scalars(select(WebhookEndpoint)).all() == []


@pytest.mark.parametrize("control", CONTROLS, ids=IDS)
def test_a_control_character_in_a_sync_referenceid_is_a_422_naming_it(
    service: Service, employer: Account, control: str
) -> None:
    body = {"mode": "upsert", "jobs": [item("OK"), item(inside("REF-1", control))]}
    result = service.api.post(f"{V}/syncs", json=body, key=employer.key)
    assert entries(result) == [("jobs[1].referenceId", "invalid_format")]
    with service.sessions() as s:
        assert s.scalars(select(SyncItem)).all() == []


def test_a_sync_item_with_a_control_character_in_its_title_fails_naming_it(
    service: Service, employer: Account, settings: Settings
) -> None:
    body = {"mode": "upsert", "jobs": [item("BAD", title="Baker\x85Chef"), item("GOOD")]}
    result = service.api.post(f"{V}/syncs", json=body, key=employer.key)
    assert result.status_code == 202, result.text
    run_it(service.sessions, settings, result.json["id"])
    done = {i["referenceId"]: i for i in items_of(service.api, employer, result.json["id"])}
    assert done["GOOD"]["outcome"] == "created"
    assert done["BAD"]["outcome"] == "failed"
    assert [(e["field"], e["code"]) for e in done["BAD"]["errors"]] == [("title", "invalid_format")]
