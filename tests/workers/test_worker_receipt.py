"""C20: an applicant's receipt, the outbox's fourth kind, sent by a real `celery worker` to a
real SMTP server (aiosmtpd) in the language of the page applied on, once, beside the
employer's copy and never in its way; a relay that turns the applicant's address away for a
while gets the receipt later, through the retries and the sweep. The stacks of
tests/workers/stacks.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from models.applications import receipts
from models.db.entities import Application, Receipt
from models.db.unit_of_work import session_scope
from tests.harness import wait_for
from tests.workers.processes import SinkServer, SlowSink
from tests.workers.stacks import EMBEDDED_SQLITE, MAIL_DOMAIN, MAIN_STACKS, Stack, apply, entry
from tests.workers.stacks import open_job as open_job
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers import enqueue

pytestmark = pytest.mark.slow
BASE = "https://jobs.example.ca"
LINK = re.compile(rf"{re.escape(BASE)}/applications/status/([\w-]+)\?lang=fr")


def receipted(s: Stack, job_id: int, language: str = "fr") -> tuple[int, int]:
    """An application and its receipt, committed, neither enqueued."""
    [app_id] = apply(s, job_id)
    with session_scope(s.sessions) as session:
        application = session.get_one(Application, app_id)
        receipt_id = receipts.queue(session, application, language=language, confidential=False)
    return app_id, receipt_id


def receipt_status(s: Stack, receipt_id: int) -> tuple[str, int]:
    with session_scope(s.sessions) as session:
        row = session.get_one(Receipt, receipt_id)
        return row.status, row.attempts


def receipt_runs(text: str) -> list[str]:
    pattern = r"Task jobpost\.deliver_receipt\[[^\]]+\] succeeded in [0-9.e-]+s: '(\w+)'"
    return re.findall(pattern, text)


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_sends_the_copy_then_the_receipt_once_and_its_link_opens_the_status(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    job_id = open_job(stack, title="Boulanger")
    app_id, receipt_id = receipted(stack, job_id)
    worker = stack.start_worker(sink.port, extra={"PUBLIC_BASE_URL": BASE})
    stack.enqueue(app_id)
    assert enqueue.deliver_receipt(stack.celery, receipt_id)
    wait_for(lambda: receipt_status(stack, receipt_id)[0] == "sent", timeout=60, what="sent")
    wait_for(lambda: entry(stack, app_id).status == "sent", timeout=60, what="the copy sent")
    copy, receipt = received.messages
    assert copy["To"] == "jobs@maple.test"
    assert receipt["To"] == "a0@example.org"
    assert receipt["Subject"] == "Votre candidature\u00a0: Boulanger"
    assert receipt["Message-ID"] == f"<receipt-{receipt_id}@{MAIL_DOMAIN}>"
    assert "maple.test" not in receipt.as_string()
    body = receipt.get_body(("plain",))
    assert body is not None
    link = LINK.search(body.get_content())
    assert link is not None
    with session_scope(stack.sessions) as session:
        shown = receipts.status(session, link[1])
    assert shown is not None and shown.state == "delivered"
    assert shown.employer == "Maple Corp" and shown.job_title == "Boulanger"
    # A stray task message and the sweeper send nothing again (C8's guarantees).
    assert enqueue.deliver_receipt(stack.celery, receipt_id)
    wait_for(lambda: len(receipt_runs(worker.text())) >= 2, timeout=30, what="the stray run")
    assert receipt_runs(worker.text()) == ["sent", "skipped"]
    assert stack.sweep() == 0
    assert len(received.messages) == 2


class Greylisting(SlowSink):
    """Turns the applicant's address away (451) `times` times; the employer's it takes."""

    def __init__(self, host: str, port: int, times: int) -> None:
        super().__init__(host, port)
        self.times = times

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if address.endswith("@example.org") and self.times > 0:
            self.times -= 1
            return "451 4.7.1 greylisted, try again later"
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_a_receipt_turned_away_is_retried_and_swept_while_the_copy_goes_at_once(
    stack: Stack, sink: SinkServer
) -> None:
    sink.sink = Greylisting(sink.sink.host, sink.sink.port, times=2)
    received = sink.start()
    job_id = open_job(stack)
    app_id, receipt_id = receipted(stack, job_id, "en")
    stack.start_worker(sink.port, extra={"PUBLIC_BASE_URL": BASE})
    stack.enqueue(app_id)
    assert enqueue.deliver_receipt(stack.celery, receipt_id)
    wait_for(lambda: entry(stack, app_id).status == "sent", timeout=60, what="the copy sent")
    wait_for(
        lambda: receipt_status(stack, receipt_id) == ("sent", 3),
        timeout=90,
        what="the receipt sent on its third attempt",
        every=stack.sweep,
    )
    assert [m["To"] for m in received.messages] == ["jobs@maple.test", "a0@example.org"]
    assert received.messages[1]["Subject"] == "Your application: Senior Baker"
