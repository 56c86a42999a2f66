"""Sync runs applied by real `celery worker` processes (C11), on Redis and on the embedded
broker, on SQLite and PostgreSQL: a run from its 202 to `completed`, a broker down at intake,
a worker SIGKILLed mid-run whose run another worker finishes with nothing applied twice, and
a cancel (and any write) mid-run served between two batches. The stack (databases, brokers,
workers) is tests/workers/stacks.py's; SYNC_LEASE_SECONDS is 3."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from api.app import Collaborators, create_app
from models import employers
from models.db.entities import Job, SyncItem, SyncRun
from models.db.unit_of_work import session_scope
from tests.conftest import Api
from tests.factories import job_body
from tests.harness import wait_for
from tests.workers import stacks
from tests.workers.processes import jobpost, worker_env
from workers import enqueue, syncing

# The stack and its database templates, shared with the delivery tests.
stack = stacks.stack
sqlite_template = stacks.sqlite_template
postgres_template = stacks.postgres_template
Stack = stacks.Stack

SYNCS = "/api/v1.1/syncs"


def api_of(s: Stack, *, broker_up: bool = True) -> Api:
    """The API on the stack's database, enqueueing runs on its broker (or on none)."""
    parts = Collaborators()
    if broker_up:
        parts.enqueue_sync = lambda run_id, rid: enqueue.sync(s.celery, run_id, rid)
    return Api(create_app(s.settings, s.sessions, parts))


def employer_key(s: Stack) -> tuple[int, str]:
    with session_scope(s.sessions) as session:
        employer = employers.create_employer(session, "Maple Corp")
        return employer.id, employers.issue_key(session, employer.id).key


def item(ref: str) -> dict[str, Any]:
    return {**job_body(title=f"Job {ref}", status="active"), "referenceId": ref}


def start(api: Api, key: str, count: int, mode: str = "snapshot") -> int:
    body = {"mode": mode, "jobs": [item(f"R{i:05}") for i in range(count)]}
    result = api.post(SYNCS, json=body, key=key)
    assert result.status_code == 202, result.text
    run_id: int = result.json["id"]
    return run_id


def run_of(s: Stack, run_id: int) -> SyncRun:
    with s.sessions() as session:
        run = session.get(SyncRun, run_id)
        assert run is not None
        return run


def progress(s: Stack, run_id: int) -> tuple[str, int]:
    """The run's status and count, read without a transaction of the engine's: on SQLite
    every transaction takes the write lock first (BEGIN IMMEDIATE), which a worker writing
    batch after batch may hold until the run is done."""
    raw = s.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"SELECT status, processed FROM sync_runs WHERE id = {int(run_id)}")
        row = cursor.fetchone()
        assert row is not None
        return str(row[0]), int(row[1])
    finally:
        raw.rollback()
        raw.close()


def completed(s: Stack, run_id: int) -> bool:
    return run_of(s, run_id).status == "completed"


@pytest.mark.parametrize("stack", stacks.EVERY_STACK, indirect=True)
def test_a_worker_applies_a_run_on_its_own_queue(stack: Stack) -> None:
    api = api_of(stack)
    _, key = employer_key(stack)
    left_out = api.post("/api/v1.1/jobs", json=item("OLD"), key=key).json["id"]
    run_id = start(api, key, 20)
    stack.start_worker(1)
    wait_for(lambda: completed(stack, run_id), timeout=60, what="the run completed")
    run = api.get(f"{SYNCS}/{run_id}", key=key).json
    assert (run["processed"], run["created"], run["archived"], run["failed"]) == (20, 20, 1, 0)
    assert api.get(f"/api/v1.1/jobs/{left_out}", key=key).json["status"] == "archived"


@pytest.mark.parametrize("stack", stacks.MAIN_STACKS, indirect=True)
def test_a_run_taken_while_the_broker_was_down_is_enqueued_by_the_sweeper(stack: Stack) -> None:
    api = api_of(stack, broker_up=False)
    _, key = employer_key(stack)
    run_id = start(api, key, 5, mode="upsert")
    stack.start_worker(1)
    wait_for(
        lambda: completed(stack, run_id),
        timeout=60,
        what="the run completed after a sweep",
        every=stack.sweep,
    )
    assert run_of(stack, run_id).created == 5


@pytest.mark.parametrize("stack", stacks.MAIN_STACKS, indirect=True)
def test_a_worker_killed_mid_run_loses_nothing_and_applies_nothing_twice(stack: Stack) -> None:
    total = 5000  # several seconds of batches: the kill lands mid-run
    api = api_of(stack)
    employer_id, key = employer_key(stack)
    run_id = start(api, key, total)
    first = stack.start_worker(1)
    wait_for(
        lambda: progress(stack, run_id)[1] >= 50,
        timeout=60,
        what="50 items applied",
        interval=0.01,
    )
    first.kill()
    status, processed = progress(stack, run_id)
    assert status == "running" and processed < total, "finished before the kill"

    stack.start_worker(1)
    # The killed worker's lease (SYNC_LEASE_SECONDS=3) runs out; the sweeper hands the run on.
    wait_for(
        lambda: completed(stack, run_id),
        timeout=180,
        what="the run completed by the second worker",
        every=stack.sweep,
        interval=0.5,
    )
    run = run_of(stack, run_id)
    assert (run.processed, run.created, run.failed) == (total, total, 0)
    assert run.claim >= 2
    with stack.sessions() as session:
        versions = session.execute(
            select(Job.version, func.count())
            .where(Job.employer_id == employer_id)
            .group_by(Job.version)
        ).all()
        assert versions == [(1, total)]  # every job created once, none written twice
        pending = session.scalar(
            select(func.count())
            .select_from(SyncItem)
            .where(SyncItem.run_id == run_id, SyncItem.outcome != "created")
        )
        assert pending == 0


def applied_while(stack: Stack, run_id: int, write: Callable[[], Any]) -> tuple[Any, int]:
    """What `write` answered, and how many items the run applied meanwhile."""
    before = progress(stack, run_id)[1]
    answer = write()
    return answer, progress(stack, run_id)[1] - before


# The API's cancel on both backends, and the operator's (`jobpost syncs cancel`) on SQLite.
CANCELS = [
    pytest.param("redis-postgresql", "api", marks=stacks.REDIS_POSTGRES.marks, id="postgresql-api"),
    pytest.param("embedded-sqlite", "api", id="sqlite-api"),
    pytest.param("embedded-sqlite", "cli", id="sqlite-cli"),
]


def cancel(stack: Stack, api: Api, key: str, run_id: int, entry: str) -> dict[str, Any]:
    """The run, as the cancel answered it: `POST /syncs/{id}/cancel`, or the command."""
    if entry == "api":
        answer = api.post(f"{SYNCS}/{run_id}/cancel", key=key)
        assert answer.status_code == 200, answer.text
        run: dict[str, Any] = answer.json
        return run
    env = worker_env(
        database_url=stack.database_url,
        broker_url=stack.broker_url,
        smtp_port=1,
        workdir=stack.workdir,
    )
    done = jobpost(env, "syncs", "cancel", str(run_id), "--json")
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


@pytest.mark.parametrize(("stack", "entry"), CANCELS, indirect=["stack"])
def test_a_cancel_stops_a_running_run_between_two_batches(stack: Stack, entry: str) -> None:
    """On SQLite the worker's batches take the one write lock back to back; a write waiting
    for it goes first at the next batch (models.db.engines `let_writers_in`), as a row lock's
    waiter does on PostgreSQL. Several writes sample that (each one alone may be let in by
    luck, between two batches of a worker that does not wait), then the cancel."""
    total, batch = 10_000, syncing.BATCH
    # The batch in progress, and the next when the write came just as it began; one more
    # for a test process slow to send.
    at_most = 3 * batch
    api = api_of(stack)
    employer_id, key = employer_key(stack)
    run_id = start(api, key, total, mode="upsert")
    # A lease (so a task's budget) longer than the run: no hand-on to another task lets
    # the writes in.
    worker = stack.start_worker(1, extra={"SYNC_LEASE_SECONDS": "120"})
    wait_for(
        lambda: progress(stack, run_id)[1] > 0,
        timeout=60,
        what="the first items applied",
        interval=0.01,
    )
    for i in range(5):
        other = functools.partial(api.post, "/api/v1.1/jobs", json=job_body(), key=key)
        answer, meanwhile = applied_while(stack, run_id, other)
        assert answer.status_code == 201, answer.text
        assert meanwhile <= at_most, f"write {i}: {meanwhile} items applied while it waited"
    sent = time.monotonic()
    answer, meanwhile = applied_while(
        stack, run_id, functools.partial(cancel, stack, api, key, run_id, entry)
    )
    took = time.monotonic() - sent
    assert answer["status"] == "cancelled"
    if entry == "api":
        assert meanwhile <= at_most and took < 5, f"{meanwhile} items applied in {took:.1f} s"
    else:  # a new process: its start is most of the time
        assert took < 15, f"the command took {took:.1f} s"
    processed = answer["processed"]
    assert processed < total // 2
    worker.wait_until(
        lambda: "'lost'" in worker.text(), timeout=60, what="the worker to let the run go"
    )
    run = run_of(stack, run_id)  # nothing applied after the cancel
    assert (run.status, run.processed, run.created) == ("cancelled", processed, processed)
    with stack.sessions() as session:
        synced = session.scalar(
            select(func.count()).where(
                Job.employer_id == employer_id, Job.reference_id.is_not(None)
            )
        )
        done = session.scalar(
            select(func.count())
            .select_from(SyncItem)
            .where(SyncItem.run_id == run_id, SyncItem.outcome != "pending")
        )
    assert synced == done == processed  # each applied item whole, with its job
