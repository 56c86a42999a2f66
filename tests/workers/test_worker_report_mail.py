"""C13: the operator's email of a fraud report, the outbox's second kind, sent by a real `celery
worker` once, after an SMTP outage, failed when REPORTS_EMAIL was unset since, and never
rewritten by the job's title. The stacks of tests/workers/stacks.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from models import reports
from models.db.entities import ReportMail
from models.db.unit_of_work import session_scope
from tests.harness import wait_for
from tests.workers.processes import SinkServer, Worker
from tests.workers.stacks import EMBEDDED_SQLITE, MAIL_DOMAIN, MAIN_STACKS, Entry, Stack, open_job
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers import delivery, enqueue

pytestmark = pytest.mark.slow


# --- C13: the operator's email of a fraud report, the outbox's second kind ---------------------

REPORTS_EMAIL = "trust@jobs.test"


def report_on(s: Stack, job_id: int, **body: Any) -> int:
    """A report, committed with its email in the outbox (REPORTS_EMAIL set), not enqueued."""
    fields = {"reason": "scam", "details": "Asks for a $200 fee.\nThen goes quiet.", **body}
    with session_scope(s.sessions) as session:
        return reports.create(session, job_id, fields, notify=True).id


def mail_of(s: Stack, report_id: int) -> Entry:
    with session_scope(s.sessions) as session:
        row = session.get_one(ReportMail, report_id)
        return Entry(row.status, row.attempts, row.last_error, None)


def report_runs(worker: Worker) -> list[str]:
    pattern = r"Task jobpost\.deliver_report\[[^\]]+\] succeeded in [0-9.e-]+s: '(\w+)'"
    return re.findall(pattern, worker.text())


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_emails_a_report_to_the_operator_once(stack: Stack, sink: SinkServer) -> None:
    received = sink.start()
    job_id = open_job(stack, referenceId="BAK-9")
    report_id = report_on(stack, job_id, email="zoé@exemple.ca")
    worker = stack.start_worker(sink.port, extra={"REPORTS_EMAIL": REPORTS_EMAIL})
    assert enqueue.deliver_report(stack.celery, report_id)
    wait_for(lambda: mail_of(stack, report_id).status == "sent", timeout=60, what="sent")
    [message] = received.messages
    assert message["To"] == REPORTS_EMAIL
    assert message["Subject"] == f"Fraud report #{report_id} (scam): Senior Baker"
    assert message["Reply-To"] == "zoé@exemple.ca"
    assert message["Message-ID"] == f"<report-{report_id}@{MAIL_DOMAIN}>"
    body = message.get_body(("plain",))
    assert body is not None
    words = body.get_content().replace("\r\n", "\n")
    assert "Asks for a $200 fee.\nThen goes quiet." in words
    assert f"Job:       {job_id}" in words and "Reference: BAK-9" in words
    assert f"jobpost reports resolve {report_id} --take-down" in words
    # A stray task message and the sweeper send nothing again (C8's guarantees).
    assert enqueue.deliver_report(stack.celery, report_id)
    wait_for(lambda: len(report_runs(worker)) >= 2, timeout=30, what="the stray run")
    assert report_runs(worker) == ["sent", "skipped"]
    assert stack.sweep() == 0
    assert len(received.messages) == 1 and mail_of(stack, report_id).attempts == 1


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_report_email_waits_out_an_smtp_outage_and_the_sweep_sends_it(
    stack: Stack, sink: SinkServer
) -> None:
    job_id = open_job(stack)
    report_id = report_on(stack, job_id)
    stack.start_worker(sink.port, extra={"REPORTS_EMAIL": REPORTS_EMAIL})  # nothing listens
    assert enqueue.deliver_report(stack.celery, report_id)

    def retried() -> bool:
        e = mail_of(stack, report_id)
        return e.status == "pending" and e.attempts >= 1

    wait_for(retried, timeout=60, what="a failed first attempt")
    assert "Connection" in (mail_of(stack, report_id).last_error or "")
    received = sink.start()
    sent = lambda: mail_of(stack, report_id).status == "sent"  # noqa: E731
    wait_for(sent, timeout=60, what="the report email sent", every=stack.sweep)
    assert [m["Message-ID"] for m in received.messages] == [f"<report-{report_id}@{MAIL_DOMAIN}>"]


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_a_report_email_is_failed_when_reports_email_was_unset_since(
    stack: Stack, sink: SinkServer
) -> None:
    """A worker without REPORTS_EMAIL has no one to send to: failed, with the reason."""
    sink.start()
    report_id = report_on(stack, open_job(stack))
    assert stack.settings.reports_email is None
    assert delivery.deliver_report(stack.sessions, stack.settings, report_id) == "failed"
    assert mail_of(stack, report_id).last_error == "REPORTS_EMAIL is not set"
    assert delivery.deliver_report(stack.sessions, stack.settings, report_id) == "skipped"


# A title whose encoded word decodes to a line break, a Content-Type and an HTML body.
HOSTILE_TITLE = (
    "Cook =?utf-8?q?x=0D=0AContent-Type:_text/html=0D=0A=0D=0A<a_href=3Dhttps://evil.test>pay</a>?="
)
REPORT_HEADERS = ["To", "From", "Subject", "Date", "Message-ID", "MIME-Version"]


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_title_holding_an_encoded_word_cannot_rewrite_the_report_email(
    stack: Stack, sink: SinkServer
) -> None:
    """C13: the report email's headers are guarded as the copies' are (workers.mail.mime).
    Written by the email package, on Python before 3.11.10 (gh-121650), this title gave the
    email a Content-Type header and an HTML body of its own; it now reads as written."""
    received = sink.start()
    job_id = open_job(stack, title=HOSTILE_TITLE)
    report_id = report_on(stack, job_id)
    extra = {"REPORTS_EMAIL": REPORTS_EMAIL, "PUBLIC_BASE_URL": "https://jobs.example.test"}
    stack.start_worker(sink.port, extra=extra)
    assert enqueue.deliver_report(stack.celery, report_id)
    wait_for(lambda: mail_of(stack, report_id).status == "sent", timeout=60, what="sent")
    [message] = received.messages
    text_part = ["Content-Type", "Content-Transfer-Encoding"]
    assert sorted(message.keys()) == sorted([*REPORT_HEADERS, *text_part])
    assert message["Subject"] == f"Fraud report #{report_id} (scam): {HOSTILE_TITLE}"
    assert not message.is_multipart() and message.get_content_type() == "text/plain"
    words = message.get_content().replace("\r\n", "\n")
    assert f"Title:     {HOSTILE_TITLE}\n" in words
    assert f"Page:      https://jobs.example.test/jobs/{job_id}\n" in words
