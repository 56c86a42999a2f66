"""C22 end to end: a real `celery worker` sends a copy from its VERP address to a real relay
(aiosmtpd) that answers 250 and then, as a mail server does, sends a delivery status
notification to that address; a real `jobpost bounces` process takes it and the copy becomes
undeliverable, shown by the API's shape. A relay that refuses at RCPT makes it undeliverable at
once; forged and malformed reports change nothing and are counted. Stacks of
tests/workers/stacks.py.
"""

from __future__ import annotations

import asyncio
import smtplib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from api import representations
from models.applications import bounces
from models.core.dates import utcnow
from models.db.entities import Application, Employer, OutboxEntry
from models.db.unit_of_work import session_scope
from models.webhooks.secrets import ensure_key_file, load_key
from tests.harness import free_port, wait_for
from tests.models.applications.test_bounces import FAILED, dsn
from tests.workers.processes import SinkServer, SlowSink, worker_env
from tests.workers.stacks import EMBEDDED_SQLITE, MAIN_STACKS, Stack, apply, entry
from tests.workers.stacks import open_job as open_job
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack

pytestmark = pytest.mark.slow
DOMAIN = "bounces.jobs.test"


class Receiver:
    """`jobpost bounces` as a process of its own, on the stack's database."""

    def __init__(self, s: Stack) -> None:
        self.port = free_port()
        env = worker_env(
            database_url=s.database_url,
            broker_url=s.broker_url,
            smtp_port=1,
            workdir=s.workdir,
            extra={"BOUNCE_DOMAIN": DOMAIN},
        )
        self.log = s.workdir / "bounces.log"
        argv = [sys.executable, "-m", "workers.cli", "bounces", "--host", "127.0.0.1"]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*argv, "--port", str(self.port)], env=env, stdout=out, stderr=out
            )
        wait_for(self._listening, timeout=30, what="jobpost bounces listening")

    def _listening(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            with smtplib.SMTP("127.0.0.1", self.port, timeout=2) as conn:
                conn.noop()
            return True
        except OSError:
            return False

    def send(self, to: str, data: bytes) -> None:
        with smtplib.SMTP("127.0.0.1", self.port, timeout=10) as conn:
            conn.sendmail("", [to], data)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def receiver(stack: Stack) -> Iterator[Receiver]:
    ensure_key_file(stack.settings)  # the key the workers sign with, and the receiver checks
    r = Receiver(stack)
    try:
        yield r
    finally:
        r.stop()


class BouncingRelay(SlowSink):
    """Takes every copy (250), then tells its envelope sender it could not be delivered."""

    def __init__(self, host: str, port: int, bounces_to: int) -> None:
        super().__init__(host, port)
        self.bounces_to = bounces_to
        self.senders: list[str] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        answer = await super().handle_DATA(server, session, envelope)
        self.senders.append(envelope.mail_from)
        recipient = envelope.rcpt_tos[0]
        report = dsn(FAILED.replace("jobs@upkeep.test", recipient))
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, self._bounce, envelope.mail_from, report)
        return answer

    def _bounce(self, to: str, report: bytes) -> None:
        with smtplib.SMTP("127.0.0.1", self.bounces_to, timeout=10) as conn:
            conn.sendmail("", [to], report)


def shown(s: Stack, application_id: int) -> dict[str, Any]:
    with session_scope(s.sessions) as session:
        return representations.application(session.get_one(Application, application_id))


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_copy_the_relay_took_and_then_bounced_is_undeliverable(
    stack: Stack, sink: SinkServer, receiver: Receiver
) -> None:
    relay = BouncingRelay(sink.sink.host, sink.sink.port, receiver.port)
    sink.sink = relay
    sink.start()
    job_id = open_job(stack)
    [app_id] = apply(stack, job_id)
    stack.start_worker(sink.port, extra={"BOUNCE_DOMAIN": DOMAIN})
    stack.enqueue(app_id)
    wait_for(
        lambda: entry(stack, app_id).status == "undeliverable",
        timeout=60,
        what="the copy undeliverable",
    )
    key = bounces.verp_key(load_key(stack.settings))
    assert relay.senders == [bounces.envelope_sender(app_id, domain=DOMAIN, key=key)]
    [message] = relay.messages
    assert message["From"] == "Jobpost <jobpost@jobs.test>"  # the header From is MAIL_FROM
    application = shown(stack, app_id)
    assert application["status"] == "undeliverable"
    bounce = application["bounce"]
    assert (bounce["permanent"], bounce["reason"], bounce["source"]) == (
        True,
        "mailbox_unknown",
        "dsn",
    )
    assert "Recipient address rejected" in bounce["diagnostic"]


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_forged_and_malformed_reports_change_nothing_and_are_counted(
    stack: Stack, sink: SinkServer, receiver: Receiver
) -> None:
    sink.start()
    job_id = open_job(stack)
    [app_id] = apply(stack, job_id)
    stack.start_worker(sink.port, extra={"BOUNCE_DOMAIN": DOMAIN})
    stack.enqueue(app_id)
    wait_for(lambda: entry(stack, app_id).status == "sent", timeout=60, what="the copy sent")
    key = bounces.verp_key(load_key(stack.settings))
    real = bounces.envelope_sender(app_id, domain=DOMAIN, key=key)
    other_key = bounces.verp_key(b"someone else's key")
    report = dsn(FAILED.replace("jobs@upkeep.test", "jobs@maple.test"))
    receiver.send(bounces.envelope_sender(app_id, domain=DOMAIN, key=other_key), report)
    receiver.send(f"bounce-{app_id}@{DOMAIN}", report)
    receiver.send(real, b"Subject: out of office\r\n\r\nI am away.\r\n")
    receiver.send(real, dsn(FAILED.replace("Status: 5.1.1", "Status: five")))
    receiver.send(real, dsn(FAILED))  # about jobs@upkeep.test, not the copy's recipient
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        receiver.send("postmaster@elsewhere.test", report)
    with session_scope(stack.sessions) as session:
        assert bounces.counts(session)[1] == {
            "forged": 1,
            "not_our_address": 1,
            "not_dsn": 1,
            "malformed": 1,
            "recipient_mismatch": 1,
        }
    assert entry(stack, app_id).status == "sent"
    assert shown(stack, app_id)["bounce"] is None


@pytest.mark.parametrize("stack", [EMBEDDED_SQLITE], indirect=True)
def test_a_relay_refusing_the_recipient_makes_the_copy_undeliverable_at_once(
    stack: Stack, sink: SinkServer
) -> None:
    sink.sink.reply = "550 5.1.1 <jobs@maple.test>: no such user"
    sink.start()
    job_id = open_job(stack)
    [app_id] = apply(stack, job_id)
    stack.start_worker(sink.port)
    stack.enqueue(app_id)
    wait_for(
        lambda: entry(stack, app_id).status == "undeliverable", timeout=60, what="undeliverable"
    )
    bounce = shown(stack, app_id)["bounce"]
    assert (bounce["source"], bounce["status"], bounce["reason"]) == (
        "smtp",
        "5.1.1",
        "mailbox_unknown",
    )
    assert sink.sink.messages == []


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_flagged_address_is_told_to_the_employers_notification_address(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    job_id = open_job(stack, language="fr", title="Boulanger")
    copies = apply(stack, job_id, 3)
    [notice] = bounces.notices(dsn(FAILED.replace("jobs@upkeep.test", "jobs@maple.test")))
    with session_scope(stack.sessions) as session:
        employer = session.get_one(Application, copies[0]).employer_id
        session.get_one(Employer, employer).notification_email = "ops@maple.test"
        sent = update(OutboxEntry).where(OutboxEntry.application_id.in_(copies))
        session.execute(sent.values(status="sent"))
        for app_id in copies:
            bounces.take(session, app_id, notice, now=utcnow())
    stack.start_worker(sink.port)
    wait_for(lambda: len(received.messages) == 1, timeout=60, what="the notice", every=stack.sweep)
    [told] = received.messages
    assert told["To"] == "ops@maple.test"
    assert told["Subject"] == "Les candidatures envoyées à jobs@maple.test sont refusées"
    text = told.get_content()
    assert f"Boulanger (id {job_id})" in text and "mailbox_unknown" in text
    assert stack.sweep() == 0
    assert len(received.messages) == 1


def test_the_receiver_refuses_to_start_without_a_bounce_domain(tmp_path: Path) -> None:
    env = worker_env(
        database_url=f"sqlite:///{tmp_path}/x.db",
        broker_url="memory://",
        smtp_port=1,
        workdir=tmp_path,
    )
    done = subprocess.run(
        [sys.executable, "-m", "workers.cli", "bounces"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode != 0
    assert b"set BOUNCE_DOMAIN" in done.stderr
