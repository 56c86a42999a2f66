"""C19: a job alert's confirmation email, the outbox's third kind, sent by a real `celery
worker` to a real SMTP server (aiosmtpd) in the subscriber's language, once; its link
confirms the alert. The stacks of tests/workers/stacks.py.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from sqlalchemy import select

from models.alerts import mails
from models.alerts import subscriptions as alerts
from models.core.dates import utcnow
from models.db.entities import AlertMail, Location
from models.db.unit_of_work import session_scope
from models.jobs.feeds import Filters
from tests.harness import wait_for
from tests.workers.processes import SinkServer, Worker
from tests.workers.stacks import EMBEDDED_SQLITE, MAIL_DOMAIN, MAIN_STACKS, Entry, Stack
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers import delivery, enqueue

pytestmark = pytest.mark.slow
BASE = "https://jobs.example.ca"


def signed_up(s: Stack, language: str = "fr", place: int | None = None) -> int:
    """A pending alert and its confirmation email, committed, not enqueued."""
    with session_scope(s.sessions) as session:
        filters = Filters(q="boulanger", place=place)
        made = alerts.sign_up(session, "zoé@exemple.ca", "daily", language, filters, now=utcnow())
        return mails.queue_confirmation(session, made.subscription, now=utcnow())


def a_place(s: Stack) -> tuple[int, str]:
    """A location's id and its name as the search page says it (C3)."""
    with session_scope(s.sessions) as session:
        found = session.execute(
            select(Location.id, Location.description)
            .where(Location.type == "City")
            .order_by(Location.id)
            .limit(1)
        ).one()
        return int(found[0]), str(found[1])


def mail_of(s: Stack, mail_id: int) -> Entry:
    with session_scope(s.sessions) as session:
        row = session.get_one(AlertMail, mail_id)
        return Entry(row.status, row.attempts, row.last_error, None)


def runs(worker: Worker) -> list[str]:
    pattern = r"Task jobpost\.deliver_alert_mail\[[^\]]+\] succeeded in [0-9.e-]+s: '(\w+)'"
    return re.findall(pattern, worker.text())


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_sends_the_confirmation_once_and_its_link_confirms(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    place, name = a_place(stack)
    mail_id = signed_up(stack, place=place)
    worker = stack.start_worker(sink.port, extra={"PUBLIC_BASE_URL": BASE})
    assert enqueue.deliver_alert_mail(stack.celery, mail_id)
    wait_for(lambda: mail_of(stack, mail_id).status == "sent", timeout=60, what="sent")
    [message] = received.messages
    assert message["To"] == "zoé@exemple.ca"
    assert message["Subject"] == "Confirmez votre alerte emploi"
    assert message["Message-ID"] == f"<alert-{mail_id}@{MAIL_DOMAIN}>"
    body = message.get_body(("plain",))
    assert body is not None
    words = body.get_content()
    assert "«\u00a0boulanger\u00a0»" in words
    assert name in words  # the place by its name, not its number
    link = re.search(rf"{re.escape(BASE)}/alerts/confirm/([\w-]+)\?lang=fr", words)
    assert link is not None
    with session_scope(stack.sessions) as session:
        confirmed = alerts.confirm(session, link[1], now=utcnow())
        assert confirmed is not None and confirmed.subscription.state == "confirmed"
    # A stray task message and the sweeper send nothing again (C8's guarantees).
    assert enqueue.deliver_alert_mail(stack.celery, mail_id)
    wait_for(lambda: len(runs(worker)) >= 2, timeout=30, what="the stray run")
    assert runs(worker) == ["sent", "skipped"]
    assert stack.sweep() == 0
    assert len(received.messages) == 1


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_a_confirmation_waits_out_an_smtp_outage_and_the_sweep_sends_it(
    stack: Stack, sink: SinkServer
) -> None:
    mail_id = signed_up(stack, "en")
    stack.start_worker(sink.port, extra={"PUBLIC_BASE_URL": BASE})  # nothing listens yet
    assert enqueue.deliver_alert_mail(stack.celery, mail_id)
    wait_for(
        lambda: mail_of(stack, mail_id).attempts >= 1, timeout=60, what="a failed first attempt"
    )
    received = sink.start()
    sent = lambda: mail_of(stack, mail_id).status == "sent"  # noqa: E731
    wait_for(sent, timeout=60, what="the confirmation sent", every=stack.sweep)
    assert [m["Subject"] for m in received.messages] == ["Confirm your job alert"]


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_nothing_is_sent_for_an_alert_confirmed_since_or_without_a_base_url(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    assert stack.settings.public_base_url is None
    first = signed_up(stack)
    assert delivery.deliver_alert_mail(stack.sessions, stack.settings, first) == "failed"
    assert "PUBLIC_BASE_URL is not set" in (mail_of(stack, first).last_error or "")
    with session_scope(stack.sessions) as session:
        made = alerts.sign_up(session, "ada@example.com", "daily", "en", Filters(), now=utcnow())
        second = mails.queue_confirmation(session, made.subscription, now=utcnow())
        alerts.confirm(session, made.confirm_token, now=utcnow())
    settings = dataclasses.replace(stack.settings, public_base_url=BASE)
    assert delivery.deliver_alert_mail(stack.sessions, settings, second) == "failed"
    assert mail_of(stack, second).last_error == "nothing to send: the alert is confirmed"
    assert delivery.deliver_alert_mail(stack.sessions, settings, second) == "skipped"
    assert received.messages == []
