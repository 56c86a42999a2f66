"""`jobpost applications export|erase --email` (C13 Privacy, C14): everything held for an
address, matched in any case, across employers; its erasure as the API's, with counts."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from api import representations
from models import employers, reports
from models.alerts import subscriptions as alerts
from models.applications import service as applications
from models.core.dates import utcnow
from models.db.entities import (
    AlertSubscription,
    Application,
    JobReport,
    OutboxEntry,
    Resume,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookMessage,
)
from models.jobs import writes as jobs
from models.jobs.feeds import Filters
from models.webhooks import messages as webhook_messages
from tests.factories import job_body
from workers.cli import main

pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
TODAY = datetime(2026, 3, 10, tzinfo=UTC).date()


def held(sessions: sessionmaker[Session]) -> dict[str, Any]:
    """Two employers' applications from Ada (in two cases), one from Grace, Ada's report."""
    with sessions() as s:
        made: dict[str, Any] = {}
        for name in ("Maple", "Birch"):
            employer = employers.create_employer(s, name, "standard")
            s.add(
                WebhookEndpoint(
                    employer_id=employer.id,
                    url="https://hooks.example/x",
                    events='["application.received"]',  # not C24's job events
                    status="enabled",
                    secret="sealed",
                    created_at=utcnow(),
                    updated_at=utcnow(),
                )
            )
            s.flush()
            made[name] = jobs.create(s, employer, job_body(status="active"), today=TODAY).id
        resume = {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()}
        sent: list[tuple[int, dict[str, Any]]] = [
            (made["Maple"], {"name": "Ada", "email": "Ada@Example.com", "resume": resume}),
            (made["Birch"], {"name": "Ada", "email": "ada@example.com"}),
            (made["Maple"], {"name": "Grace", "email": "grace@example.com"}),
        ]
        ids = []
        for job_id, fields in sent:
            opened = applications.open_job(s, job_id)
            a = applications.submit(s, opened, applications.check(fields))
            data = representations.application(a)
            webhook_messages.emit(
                s,
                opened.employer_id,
                "application.received",
                data,
                application_id=a.id,
                now=utcnow(),
            )
            ids.append(a.id)
        report = reports.create(
            s,
            made["Birch"],
            {"reason": "scam", "details": "Asks for money.", "email": "ADA@example.com"},
        )
        # Ada's alerts (C19): one confirmed, one pending; Grace's is not hers.
        for email in ("ada@example.com", "Ada@Example.com", "grace@example.com"):
            alerts.sign_up(s, email, "daily", "fr", Filters(q="cook"), now=utcnow())
        s.flush()
        made.update(ids=ids, report=report.id)
        s.commit()
        return made


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    text = capsys.readouterr().out
    return code, orjson.loads(text) if text.startswith("{") else text


def test_export_prints_everything_held_for_the_address_in_any_case(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    made = held(copy)
    ada, _, grace = made["ids"]
    code, found = run(capsys, "applications", "export", "--email", "ADA@EXAMPLE.COM")
    assert code == 0
    assert set(found) == {"email", "applications", "deliveries", "reports", "alerts"}
    [alert] = found["alerts"]  # Ada's second sign-up to the same search is the same alert
    assert alert["email"] == "ada@example.com" and alert["filters"] == "q=cook"
    assert (alert["state"], alert["language"], alert["frequency"]) == ("pending", "fr", "daily")
    assert found["email"] == "ADA@EXAMPLE.COM"
    assert [a["id"] for a in found["applications"]] == [ada, ada + 1]
    first = found["applications"][0]
    assert first["resume"] == {
        "filename": "cv.pdf",
        "size": len(PDF),
        "contentType": "application/pdf",
    }
    assert set(first) == {
        "id", "jobId", "name", "email", "phone", "coverLetter", "receivedAt", "resume",
        "status", "attempts", "sentAt", "lastError", "answers", "knockedOut", "knockedOutBy",
        "bounce",
    }  # fmt: skip
    kinds = sorted((d["kind"], d["applicationId"]) for d in found["deliveries"])
    assert kinds == [("email", ada), ("email", ada + 1), ("webhook", ada), ("webhook", ada + 1)]
    hook = next(d for d in found["deliveries"] if d["kind"] == "webhook")
    assert hook["event"] == "application.received" and hook["id"].startswith("msg_")
    assert hook["status"] == "pending"
    [report] = found["reports"]
    assert report["id"] == made["report"] and report["email"] == "ADA@example.com"
    assert set(report) == {
        "id", "jobId", "reason", "details", "email", "status", "createdAt", "resolvedAt", "note"
    }  # fmt: skip
    assert grace not in [a["id"] for a in found["applications"]]


def test_erase_erases_it_all_prints_the_counts_and_a_second_time_none(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    made = held(copy)
    _, _, grace = made["ids"]
    code, counts = run(capsys, "applications", "erase", "--email", "ada@EXAMPLE.com", "--json")
    assert code == 0
    assert counts == {
        "applications": 2, "resumes": 1, "deliveries": 4, "reports": 1, "alerts": 1
    }  # fmt: skip
    with copy() as s:
        assert list(s.scalars(select(Application.id))) == [grace]
        assert list(s.scalars(select(AlertSubscription.email))) == ["grace@example.com"]
        assert s.scalar(select(func.count()).select_from(Resume)) == 0
        assert list(s.scalars(select(OutboxEntry.application_id))) == [grace]
        report = s.get(JobReport, made["report"])
        assert report is not None and report.email is None and report.details  # kept, unnamed
        payloads = [orjson.loads(p) for p in s.scalars(select(WebhookMessage.payload))]
        assert sorted((p["data"]["id"], p["data"].get("erased")) for p in payloads) == [
            (made["ids"][0], True),
            (made["ids"][1], True),
            (grace, None),
        ]
        cancelled = s.scalar(
            select(func.count())
            .select_from(WebhookDelivery)
            .where(WebhookDelivery.status == "cancelled")
        )
        assert cancelled == 2
    code, again = run(capsys, "applications", "erase", "--email", "ada@example.com", "--json")
    nothing = {"applications": 0, "resumes": 0, "deliveries": 0, "reports": 0, "alerts": 0}
    assert (code, again) == (0, nothing)
    code, empty = run(capsys, "applications", "export", "--email", "ada@example.com")
    assert empty == {
        "email": "ada@example.com",
        "applications": [],
        "deliveries": [],
        "reports": [],
        "alerts": [],
    }


def test_an_address_with_no_data_erases_nothing_and_says_so(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    held(copy)
    code, text = run(capsys, "applications", "erase", "--email", "nobody@example.com")
    assert code == 0
    assert text.strip() == (
        "Erased for nobody@example.com: 0 applications, 0 resumes, 0 deliveries, 0 reports, "
        "0 alerts."
    )
    with copy() as s:
        assert s.scalar(select(func.count()).select_from(Application)) == 3
        assert s.scalar(select(func.count()).select_from(AlertSubscription)) == 2


@pytest.mark.parametrize("command", ["export", "erase"])
@pytest.mark.parametrize("address", ["not-an-address", "ada@", "a b@example.com", ""])
def test_a_malformed_address_is_a_usage_error(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str], command: str, address: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["applications", command, "--email", address])
    assert stopped.value.code == 2
    assert "is not a valid email address" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["applications", command])
    assert stopped.value.code == 2
