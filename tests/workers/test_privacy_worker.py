"""C13: erasing an application while a real worker is sending its copy. The send in flight
finishes (the relay has it), its mark changes no row, and nothing is left or sent again."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from models.applications import privacy
from models.core.dates import utcnow
from models.db.entities import Application, OutboxEntry, Resume
from models.db.unit_of_work import session_scope
from tests.harness import wait_for
from tests.workers.processes import SinkServer
from tests.workers.stacks import (
    MAIN_STACKS,
    MidSend,
    Stack,
    apply,
    message_id,
    open_job,
    task_results,
)

# The real stack of the delivery tests (database copies, broker, workers), as fixtures here.
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack_fixture

pytestmark = pytest.mark.slow
stack = stack_fixture


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_erasing_mid_send_lets_the_send_finish_and_leaves_nothing(stack: Stack) -> None:
    [app_id] = apply(stack, open_job(stack), resume=True)

    def erase() -> privacy.Erased:
        with session_scope(stack.sessions) as s:
            return privacy.erase(s, [app_id], now=utcnow())

    server = SinkServer()
    server.sink = watching = MidSend("127.0.0.1", server.port, erase)
    server.start()
    try:
        worker = stack.start_worker(server.port)
        stack.enqueue(app_id)
        wait_for(lambda: task_results(worker), timeout=60, what="the delivery task's end")
    finally:
        server.stop()
    # Erased while the relay held the DATA: the claim was committed, no lock held it up.
    assert watching.seen == [privacy.Erased(applications=1, resumes=1, deliveries=1)]
    assert task_results(worker) == ["sent"]  # the send in flight finished
    assert watching.message_ids() == [message_id(app_id)]
    with session_scope(stack.sessions) as s:
        for entity in (Application, Resume, OutboxEntry):
            assert s.scalar(select(func.count()).select_from(entity)) == 0
    assert stack.sweep() == 0  # nothing is left to send again
