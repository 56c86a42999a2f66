"""C12: no tenant starves another, with real `celery worker` processes, Redis, PostgreSQL, a real
SMTP server and real HTTP receivers. Employer A's eight endpoints answer only after 10 s and
its queue holds dozens of deliveries; employer B's application copy and webhook still arrive
(the issue's bounds: 15 s and 30 s), and A's backlog goes on, within its caps, with no attempt
counted for a delivery that waited.

The worker is the one compose and the Procfile run: every queue, the threads pool, 16 tasks at
once. Without the webhooks queue and the caps, A's 64 deliveries take every thread for 10 s at
a time, four times over, before B's copy or webhook is reached."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from models import employers
from models.core.dates import utcnow
from models.db.entities import Job, WebhookDelivery, WebhookEndpoint
from models.db.unit_of_work import session_scope
from models.webhooks import messages as webhook_messages
from models.webhooks import secrets
from tests.harness import wait_for
from tests.webhook_receiver import Behaviour, Receiver, receiving
from tests.workers import stacks
from tests.workers.processes import SinkServer
from tests.workers.stacks import REDIS_POSTGRES, Stack, apply, open_job
from tests.workers.test_webhook_worker import HOOK_ENV, KEY, SECRET
from workers import enqueue

pytestmark = pytest.mark.slow

# The stacks of the email delivery tests (a database copy, a broker, workers), shared.
postgres_template = stacks.postgres_template
globals()["stack"] = stacks.stack
sink = stacks.sink

SLOW_SECONDS = 10.0  # A's receivers answer after this
# A's lease outlasts its receivers' wait: the sends end by 0.8 of it, not at 2.4 s.
TENANT_ENV = {**HOOK_ENV, "OUTBOX_LEASE_SECONDS": "60"}


@pytest.fixture
def slow() -> Iterator[Receiver]:
    with receiving() as r:
        r.behaviour = Behaviour(status=204, delay=SLOW_SECONDS)
        yield r


@pytest.fixture
def fast() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


def employer_with(stack: Stack, urls: list[str], employer_id: int | None = None) -> int:
    """An employer (a new one unless given) with an enabled endpoint at each URL."""
    now = utcnow()
    with session_scope(stack.sessions) as s:
        if employer_id is None:
            employer_id = employers.create_employer(s, f"Tenant {time.monotonic_ns()}").id
        for url in urls:
            s.add(
                WebhookEndpoint(
                    employer_id=employer_id,
                    url=url,
                    events='["*"]',
                    status="enabled",
                    secret=secrets.encrypt(SECRET, KEY),
                    created_at=now,
                    updated_at=now,
                )
            )
        return employer_id


def emit(stack: Stack, employer_id: int, count: int, type: str = "job.refreshed") -> list[int]:
    with session_scope(stack.sessions) as s:
        now = utcnow()
        messages = [
            webhook_messages.emit(s, employer_id, type, {"id": n}, now=now) for n in range(count)
        ]
        return webhook_messages.pending_of(s, messages, now=now)


def attempts(stack: Stack, ids: list[int]) -> int:
    """The most attempts any of the deliveries has had."""
    with stack.sessions() as s:
        most = s.scalar(
            select(func.max(WebhookDelivery.attempts)).where(WebhookDelivery.id.in_(ids))
        )
        return int(most or 0)


@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_a_slow_employer_holds_only_its_own_webhooks(
    stack: Stack, sink: SinkServer, slow: Receiver, fast: Receiver
) -> None:
    received = sink.start()
    a = employer_with(stack, [f"http://127.0.0.1:{slow.port}/a{n}" for n in range(8)])
    a_ids = emit(stack, a, 8)  # 8 events to 8 endpoints: 64 deliveries
    assert len(a_ids) == 64
    job_id = open_job(stack)  # B's job, routed by email
    with stack.sessions() as s:
        b = s.scalars(select(Job.employer_id).where(Job.id == job_id)).one()
    employer_with(stack, [f"http://127.0.0.1:{fast.port}/b"], employer_id=b)
    [app_id] = apply(stack, job_id)
    b_ids = emit(stack, b, 1, "application.received")
    stack.start_worker(sink.port, concurrency=16, pool="threads", extra=TENANT_ENV)

    assert enqueue.deliver_webhooks(stack.celery, a_ids) == 64
    started = time.monotonic()
    stack.enqueue(app_id)  # B's copy, on the email queue
    assert enqueue.deliver_webhooks(stack.celery, b_ids) == 1  # behind A's 64

    wait_for(lambda: received.messages, timeout=15, what="B's application copy within 15 s")
    copy_after = time.monotonic() - started
    wait_for(lambda: fast.received, timeout=30 - copy_after, what="B's webhook within 30 s")
    assert time.monotonic() - started < 30
    wait_for(lambda: slow.in_flight == 8, timeout=5, what="A's cap of deliveries in flight")

    # A's backlog goes on as its first deliveries end: those that waited are handed on.
    wait_for(lambda: len(slow.received) > 8, timeout=30, what="A's next deliveries")
    assert slow.most_at_once == 8  # WEBHOOK_EMPLOYER_IN_FLIGHT, never more
    assert attempts(stack, a_ids) == 1  # a delivery that waited counted no attempt
    assert [r.path for r in fast.received] == ["/b"]
