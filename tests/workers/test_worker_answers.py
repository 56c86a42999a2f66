"""C21 end to end: a real `celery worker`, a real broker and SMTP server (tests/workers/
stacks.py's stacks) deliver the copy of an application that answered screening questions,
the answers and the knock-out in it; an employer that keeps knocked-out applications from the
mail gets no copy of one, whatever the sweeper finds."""

from __future__ import annotations

import time
from typing import Any

import pytest

from models import employers
from models.applications import service as applications
from models.db.entities import Application, Employer, OutboxEntry
from models.db.unit_of_work import session_scope
from tests.api.test_questions import GOOD, QUESTIONS
from tests.harness import wait_for
from tests.workers.processes import SinkServer
from tests.workers.stacks import MAIN_STACKS, Stack, entry, open_job
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sink as sink
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers import tasks

pytestmark = pytest.mark.slow


def answered(s: Stack, job_id: int, answers: dict[str, Any]) -> int:
    """An application with these answers, committed, not yet enqueued."""
    with session_scope(s.sessions) as session:
        job = applications.open_job(session, job_id)
        fields = {"name": "Ada", "email": "ada@example.org", "answers": answers}
        return applications.submit(session, job, applications.check(fields, job)).id


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_delivers_the_answers_and_the_knock_out(stack: Stack, sink: SinkServer) -> None:
    received = sink.start()
    job_id = open_job(stack, questions=QUESTIONS)
    app_id = answered(stack, job_id, {**GOOD, "workAuth": False})
    stack.start_worker(sink.port)
    stack.enqueue(app_id)
    wait_for(lambda: entry(stack, app_id).status == "sent", timeout=60, what="the copy sent")
    text = received.messages[0].get_body(("plain",))
    assert text is not None
    content = text.get_content()
    for line in (
        "Knocked out: yes, by the answer to: Are you legally entitled to work in Canada?",
        "Are you legally entitled to work in Canada?: No",
        "Which ovens have you used?: Deck, Wood-fired",
        "Why bread?: Crust",
    ):
        assert line in content


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_knocked_out_application_kept_from_the_mail_is_never_sent(
    stack: Stack, sink: SinkServer
) -> None:
    received = sink.start()
    job_id = open_job(stack, questions=QUESTIONS)
    with session_scope(stack.sessions) as session:
        [owner] = session.query(Employer).all()
        employers.update_settings(session, owner.id, {"emailKnockedOut": False})
    kept = answered(stack, job_id, {**GOOD, "shift": "night"})
    sent = answered(stack, job_id, GOOD)
    stack.start_worker(sink.port)
    stack.enqueue(sent)
    wait_for(lambda: entry(stack, sent).status == "sent", timeout=60, what="the copy sent")
    tasks.run_sweep(stack.sessions, stack.settings)  # finds nothing of the knocked-out one
    time.sleep(1)
    assert len(received.messages) == 1
    with session_scope(stack.sessions) as session:
        application = session.get(Application, kept)
        assert application is not None and application.knocked_out_by == "shift"
        assert session.get(OutboxEntry, kept) is None
