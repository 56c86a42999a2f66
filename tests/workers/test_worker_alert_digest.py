"""C19: the digests of job alerts end to end. `jobpost tasks run digests` plans them and
enqueues them; a real `celery worker` sends them to a real SMTP server (aiosmtpd) in the
subscriber's language, with RFC 8058's one-click unsubscribe, once, even when the worker is
killed mid-send. The stacks of tests/workers/stacks.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import falcon.testing
import pytest
from sqlalchemy import select

from api import ratelimit
from api.app import Collaborators, create_app
from models import employers
from models.alerts import subscriptions as alerts
from models.core.dates import today_in, utcnow
from models.db.entities import AlertMail, AlertSubscription, Job
from models.db.unit_of_work import session_scope
from models.jobs import writes as jobs
from models.jobs.feeds import Filters
from tests.factories import job_body
from tests.harness import wait_for
from tests.workers.processes import SinkServer, SlowSink, jobpost, worker_env
from tests.workers.stacks import EMBEDDED_SQLITE, MAIL_DOMAIN, MAIN_STACKS, Stack
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers import delivery
from workers.tasks import run_digests

pytestmark = pytest.mark.slow
BASE = "https://jobs.example.ca"


def subscribed(s: Stack, language: str = "fr", q: str = "boulanger") -> int:
    """A daily alert confirmed two days ago: due, its watermark before every job."""
    at = utcnow() - timedelta(days=2)
    with session_scope(s.sessions) as session:
        made = alerts.sign_up(session, "zoé@exemple.ca", "daily", language, Filters(q=q), now=at)
        assert alerts.confirm(session, made.confirm_token, now=at) is not None
        return made.subscription.id


def posted(s: Stack, titles: list[str], **body: Any) -> list[int]:
    """Active jobs of one employer, committed; opened long enough ago to be past the lag."""
    today = today_in(s.settings.timezone)
    with session_scope(s.sessions) as session:
        owner = employers.create_employer(session, "Boulangerie Côté")
        made = [
            jobs.create(session, owner, job_body(title=t, status="active", **body), today=today)
            for t in titles
        ]
        ids = [job.id for job in made]
    with session_scope(s.sessions) as session:  # a minute ago: past CHANGE_FEED_LAG_SECONDS
        for job in session.scalars(select(Job).where(Job.id.in_(ids))):
            assert job.opened_at is not None
            job.opened_at -= timedelta(minutes=1)
    return ids


def close(s: Stack, job_id: int) -> None:
    with session_scope(s.sessions) as session:
        owner = session.get_one(Job, job_id).employer
        job = jobs.get(session, owner, job_id)
        jobs.update(
            session, owner, job, {"status": "archived"}, today=today_in(s.settings.timezone)
        )


def planned(s: Stack, settings: Any = None) -> list[int]:
    """The beat's digests task, run here: every digest queued so far (enqueued on the broker)."""
    run_digests(s.sessions, settings or s.settings, celery=s.celery)
    with session_scope(s.sessions) as session:
        return list(session.scalars(select(AlertMail.id).order_by(AlertMail.id)))


def mail_of(s: Stack, mail_id: int) -> AlertMail:
    with session_scope(s.sessions) as session:
        return session.get_one(AlertMail, mail_id)


def alert_of(s: Stack, alert_id: int) -> AlertSubscription:
    with session_scope(s.sessions) as session:
        return session.get_one(AlertSubscription, alert_id)


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_french_digest_lists_twenty_links_the_rest_and_unsubscribes_in_one_click(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    alert_id = subscribed(stack)
    ids = posted(stack, [f"Boulanger {i}" for i in range(25)])
    worker = stack.start_worker(sink.port, extra={"PUBLIC_BASE_URL": BASE})
    env = worker_env(
        database_url=stack.database_url,
        broker_url=stack.broker_url,
        smtp_port=sink.port,
        workdir=stack.workdir,
        extra={"PUBLIC_BASE_URL": BASE},
    )
    done = jobpost(env, "tasks", "run", "digests", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"task": "digests", "changed": 1}
    [mail_id] = planned(stack)  # the second run queues nothing more
    wait_for(lambda: mail_of(stack, mail_id).status == "sent", timeout=60, what="sent")
    [message] = received.messages
    assert message["To"] == "zoé@exemple.ca"
    assert message["Subject"] == "25 nouveaux emplois pour «\u00a0boulanger\u00a0»"
    assert message["Message-ID"] == f"<alert-{mail_id}@{MAIL_DOMAIN}>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    pattern = rf"<({re.escape(BASE)}/alerts/unsubscribe/[\w-]+)>"
    unsubscribe = re.fullmatch(pattern, message["List-Unsubscribe"])
    assert unsubscribe is not None
    body = message.get_body(("plain",))
    assert body is not None
    words = body.get_content()
    links = re.findall(rf"{re.escape(BASE)}/jobs/(\d+)\?lang=fr", words)
    assert [int(i) for i in links] == list(reversed(ids))[:20]  # the newest twenty
    assert "5 autres emplois\u00a0:" in words
    more = re.search(rf"{re.escape(BASE)}/jobs\?(\S+)", words)
    assert more is not None and parse_qsl(more[1]) == [("q", "boulanger"), ("lang", "fr")]
    assert "Boulangerie Côté" in words and "Toronto, ON" in words
    assert re.search(rf"{re.escape(BASE)}/alerts/manage/[\w-]+\?lang=fr", words)
    assert mail_of(stack, mail_id).opened_until == alert_of(stack, alert_id).last_sent_at
    # RFC 8058: the mail client's POST to the header's address, with no further step.
    parts = Collaborators(limiter=ratelimit.Unlimited())
    app = falcon.testing.TestClient(create_app(stack.settings, stack.sessions, parts))
    answer = app.simulate_post(
        urlsplit(unsubscribe[1]).path,
        body="List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 200
    assert alert_of(stack, alert_id).state == "unsubscribed"
    assert worker.proc.poll() is None


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_unsubscribed_or_every_job_closed_since_the_planning_sends_nothing(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    settings = dataclasses.replace(stack.settings, public_base_url=BASE, smtp_port=sink.port)
    gone = subscribed(stack, "en", q="cook")
    closing = subscribed(stack, "en", q="pilot")
    posted(stack, ["Line Cook"])
    [pilot] = posted(stack, ["Bush Pilot"])
    first, second = planned(stack, settings)
    by_alert = {mail_of(stack, m).subscription_id: m for m in (first, second)}
    with session_scope(stack.sessions) as session:
        token = alerts.manage_token(session, session.get_one(AlertSubscription, gone), now=utcnow())
        alerts.unsubscribe(session, token, now=utcnow())
    close(stack, pilot)
    assert delivery.deliver_alert_mail(stack.sessions, settings, by_alert[gone]) == "failed"
    assert mail_of(stack, by_alert[gone]).last_error == "nothing to send: the alert is unsubscribed"
    assert delivery.deliver_alert_mail(stack.sessions, settings, by_alert[closing]) == "failed"
    closed = mail_of(stack, by_alert[closing])
    assert "every job of the digest has closed" in (closed.last_error or "")
    assert alert_of(stack, closing).last_sent_at == closed.opened_until  # the watermark moved
    assert received.messages == []


class HeldAtRcpt(SlowSink):
    """A relay that holds the first attempt's RCPT for a long time (the worker is killed
    then, before any DATA) and answers the next ones at once."""

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if self.rcpt_count == 0:
            self.rcpt_count += 1
            await asyncio.sleep(30)
            return "451 too late"
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_killed_mid_send_then_the_sweep_sends_the_digest_once(stack: Stack) -> None:
    server = SinkServer()
    server.sink = held = HeldAtRcpt("127.0.0.1", server.port)
    received = server.start()
    try:
        alert_id = subscribed(stack, "en", q="cook")
        posted(stack, ["Line Cook", "Prep Cook"])
        first = stack.start_worker(server.port, extra={"PUBLIC_BASE_URL": BASE})
        [mail_id] = planned(stack)
        wait_for(lambda: held.rcpt_count >= 1, timeout=60, what="the first attempt's RCPT")
        first.kill()
        assert mail_of(stack, mail_id).status == "sending"
        stack.start_worker(server.port, extra={"PUBLIC_BASE_URL": BASE})
        sent = lambda: mail_of(stack, mail_id).status == "sent"  # noqa: E731
        wait_for(sent, timeout=60, what="the digest sent", every=stack.sweep)
        assert [m["Subject"] for m in received.messages] == ["2 new jobs for “cook”"]
        assert mail_of(stack, mail_id).attempts == 2
        assert alert_of(stack, alert_id).last_sent_at == mail_of(stack, mail_id).opened_until
        assert stack.sweep() == 0 and planned(stack) == [mail_id]
    finally:
        server.stop()
