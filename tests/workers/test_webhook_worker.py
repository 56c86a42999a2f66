"""C12's delivery engine for webhooks: real `celery worker` processes in each pool (solo,
prefork, threads), a real broker and database (tests/workers/stacks.py) and a
real HTTP receiver that checks signatures with the Standard Webhooks library.

The receiver listens on 127.0.0.1 over plain HTTP: the workers run with
WEBHOOK_ALLOW_HTTP=true and WEBHOOK_ALLOW_PRIVATE=true, as C12 allows for tests (TLS, SNI and
the address judgment are tested in process: test_webhook_client, test_webhook_delivery)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet
from standardwebhooks import Webhook

from models import employers
from models.core.dates import utcnow
from models.db.entities import WebhookDelivery, WebhookEndpoint
from models.db.unit_of_work import session_scope
from models.webhooks import messages as webhook_messages
from models.webhooks import secrets
from tests.harness import wait_for
from tests.webhook_receiver import Behaviour, Receiver, receiving
from tests.workers import stacks
from tests.workers.stacks import MAIN_STACKS, REDIS_POSTGRES, Stack
from workers import enqueue

pytestmark = pytest.mark.slow

# The stacks of the email delivery tests (a database copy, a broker, workers), shared.
sqlite_template = stacks.sqlite_template
postgres_template = stacks.postgres_template
globals()["stack"] = stacks.stack

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = Fernet.generate_key()
EVERY_POOL = ["solo", "prefork", "threads"]
HOOK_ENV = {
    "WEBHOOK_ALLOW_HTTP": "true",
    "WEBHOOK_ALLOW_PRIVATE": "true",
    "WEBHOOK_ALLOWED_PORTS": "1024-65535",  # the receivers' free ports (C12)
    "WEBHOOK_RETRY_SCHEDULE": "1,1,1",
    "JOBPOST_SECRET_KEY": KEY.decode(),
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


def concurrency_of(pool: str) -> int:
    return 1 if pool == "solo" else 4


def hooked(stack: Stack, receiver: Receiver, count: int) -> list[int]:
    """An employer with an endpoint at the receiver, and `count` events for it."""
    now = utcnow()
    with session_scope(stack.sessions) as s:
        employer_id = employers.create_employer(s, "Acme").id
        s.add(
            WebhookEndpoint(
                employer_id=employer_id,
                url=f"http://127.0.0.1:{receiver.port}/hook",
                events='["*"]',
                status="enabled",
                secret=secrets.encrypt(SECRET, KEY),
                created_at=now,
                updated_at=now,
            )
        )
        s.flush()
        messages = [
            webhook_messages.emit(s, employer_id, "job.refreshed", {"id": n}, now=now)
            for n in range(count)
        ]
        return webhook_messages.pending_of(s, messages, now=now)


def statuses(stack: Stack, ids: list[int]) -> dict[int, tuple[str, int]]:
    with stack.sessions() as s:
        rows = s.query(WebhookDelivery).filter(WebhookDelivery.id.in_(ids))
        return {r.id: (r.status, r.attempts) for r in rows}


def all_succeeded(stack: Stack, ids: list[int]) -> bool:
    return all(status == "succeeded" for status, _ in statuses(stack, ids).values())


def start(stack: Stack, pool: str) -> None:
    stack.start_worker(1, concurrency=concurrency_of(pool), pool=pool, extra=HOOK_ENV)


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_each_pool_delivers_every_webhook_once_signed(
    stack: Stack, pool: str, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=200, delay=0.3)
    ids = hooked(stack, receiver, 8)
    start(stack, pool)
    assert enqueue.deliver_webhooks(stack.celery, ids) == len(ids)
    wait_for(lambda: all_succeeded(stack, ids), timeout=90, what="every webhook delivered")
    assert {attempts for _, attempts in statuses(stack, ids).values()} == {1}
    assert len(receiver.received) == len(ids)
    assert len({r.headers["webhook-id"] for r in receiver.received}) == len(ids)
    for got in receiver.received:
        Webhook(SECRET).verify(got.body, got.headers)
    if concurrency_of(pool) > 1:
        assert receiver.most_at_once > 1, "the sends did not overlap"


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_hanging_receiver_is_given_up_before_the_lease_and_retried(
    stack: Stack, pool: str, receiver: Receiver
) -> None:
    """The receiver holds the first POST; the task gives up at its deadline (0.8 of
    OUTBOX_LEASE_SECONDS=3), records a retry, and the next attempt succeeds."""
    receiver.behaviour = Behaviour(hang=True)
    [d] = hooked(stack, receiver, 1)
    start(stack, pool)
    enqueue.deliver_webhooks(stack.celery, [d])
    wait_for(lambda: receiver.received, timeout=30, what="the first POST")
    receiver.behaviour = Behaviour(status=204)
    wait_for(
        lambda: all_succeeded(stack, [d]),
        timeout=60,
        what="the webhook delivered on a later attempt",
        every=stack.sweep,
    )
    assert statuses(stack, [d])[d][1] == 2
    assert stack.workers[0].alive()


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_worker_killed_mid_send_leaves_the_delivery_to_the_sweeper(
    stack: Stack, pool: str, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=204, delay=2.0)
    [d] = hooked(stack, receiver, 1)
    start(stack, pool)
    enqueue.deliver_webhooks(stack.celery, [d])
    wait_for(lambda: receiver.received, timeout=30, what="the receiver to hold the POST")
    stack.workers[0].kill()
    killed_at = time.monotonic()
    assert statuses(stack, [d])[d][0] == "sending"
    receiver.behaviour = Behaviour(status=204)
    start(stack, pool)
    wait_for(
        lambda: all_succeeded(stack, [d]),
        timeout=60,
        what="the webhook delivered by the second worker",
        every=stack.sweep,
    )
    assert time.monotonic() - killed_at > 0.5  # not before the lease ran out
    assert statuses(stack, [d])[d][1] == 2
    assert {r.headers["webhook-id"] for r in receiver.received} == {
        receiver.received[0].headers["webhook-id"]
    }  # the same message id: the receiver de-duplicates


@pytest.mark.parametrize("pool", EVERY_POOL)
@pytest.mark.parametrize("stack", [REDIS_POSTGRES], indirect=True)
def test_in_each_pool_a_warm_shutdown_mid_send_finishes_and_records_it(
    stack: Stack, pool: str, receiver: Receiver
) -> None:
    receiver.behaviour = Behaviour(status=204, delay=1.0)
    [d] = hooked(stack, receiver, 1)
    start(stack, pool)
    enqueue.deliver_webhooks(stack.celery, [d])
    wait_for(lambda: receiver.received, timeout=30, what="the receiver to hold the POST")
    worker = stack.workers[0]
    worker.stop(timeout=30)  # SIGTERM: Celery's warm shutdown
    assert worker.proc.returncode == 0, "the worker did not end by itself"
    assert statuses(stack, [d]) == {d: ("succeeded", 1)}
    assert len(receiver.received) == 1
