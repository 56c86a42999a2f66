"""The service behind PgBouncer in transaction mode (C9: DATABASE_URL's `pooler=transaction`).

Two server connections serve every client, each transaction on whichever is free: API writes,
reads with the same key, lists and deliveries, run at once, must all answer right. psycopg
prepares a statement on its fifth run on one server connection, and the next transaction may
run on the other; without the parameter the mix below answered 500s, 503s, 401s for a valid
key and wrong results, and deliveries failed at the claim."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import pytest
from sqlalchemy import select

from api import ratelimit
from api.app import Collaborators, create_app
from models import employers
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.entities import OutboxEntry
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import SmtpSink
from tests.factories import JOBS, job_body
from tests.pgbouncer import pgbouncer
from tests.services import scratch_postgres
from workers.delivery import deliver
from workers.mail import relay
from workers.mail.content import message_id

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CLIENTS = 6  # employers calling at once, each with its own key
JOBS_EACH = 3
ROUNDS = 8  # of: GET each job, PUT one, list, apply to one
DELIVERERS = 2
MAIL_FROM = "jobpost@jobs.test"


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with scratch_postgres() as url:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


@dataclasses.dataclass
class Mix:
    """What the calls and deliveries saw: anything wrong, and the applications accepted."""

    errors: list[str] = dataclasses.field(default_factory=list)
    applied: list[int] = dataclasses.field(default_factory=list)
    delivered: list[str] = dataclasses.field(default_factory=list)


def test_calls_and_deliveries_through_a_transaction_pooler_all_answer_right(
    database: str, smtp_sink: SmtpSink, tmp_path: Path
) -> None:
    with pgbouncer(database, pool_mode="transaction", pool_size=2) as url:
        settings = Settings.from_env(
            {
                "DATABASE_URL": url,
                "JOBPOST_VAR_DIR": str(tmp_path),
                "SMTP_PORT": str(smtp_sink.port),
                "MAIL_FROM": MAIL_FROM,
            }
        )
        engine = make_engine(settings.database_url)
        try:
            mix = _run(settings, make_sessionmaker(engine))
            with engine.connect() as conn:
                states = conn.execute(select(OutboxEntry.application_id, OutboxEntry.status))
                outbox = {app_id: status for app_id, status in states}
        finally:
            engine.dispose()
            relay.RELAY.close()
    assert mix.errors == []
    assert len(mix.applied) == CLIENTS * ROUNDS
    assert mix.delivered == ["sent"] * len(mix.applied)
    assert outbox == dict.fromkeys(mix.applied, "sent")
    sent = sorted(str(m["Message-ID"]) for m in smtp_sink.messages)
    assert sent == sorted(message_id(i, "jobs.test") for i in mix.applied)  # each once


def _run(settings: Settings, sessions: Any) -> Mix:
    """Every client's calls in a thread of its own, and the deliverers taking each accepted
    application as the app enqueues it (after its commit, as the broker would)."""
    mix = Mix()
    accepted: queue.Queue[int | None] = queue.Queue()
    parts = Collaborators(
        enqueue=lambda app_id, _request: accepted.put(app_id), limiter=ratelimit.Unlimited()
    )
    client = falcon.testing.TestClient(create_app(settings, sessions, parts))
    keys = []
    with session_scope(sessions) as s:
        for n in range(CLIENTS):
            employer = employers.create_employer(s, f"Pooled {n}")
            keys.append(employers.issue_key(s, employer.id).key)

    def deliverer() -> None:
        while (app_id := accepted.get()) is not None:
            try:
                mix.delivered.append(deliver(sessions, settings, app_id))
            except Exception as e:
                mix.errors.append(f"delivery of {app_id}: {e!r}")

    callers = [
        threading.Thread(target=_calls, args=(client, n, key, mix)) for n, key in enumerate(keys)
    ]
    deliverers = [threading.Thread(target=deliverer) for _ in range(DELIVERERS)]
    for thread in callers + deliverers:
        thread.start()
    for thread in callers:
        thread.join()
    for _ in deliverers:
        accepted.put(None)
    for thread in deliverers:
        thread.join()
    return mix


def _calls(client: falcon.testing.TestClient, n: int, key: str, mix: Mix) -> None:  # noqa: C901 (one check per kind of call)
    """One employer's writes, reads, lists and applications, each answer checked."""
    auth = {"API-Key": key}

    def expect(result: Any, status: int, what: str) -> bool:
        if result.status_code != status:
            mix.errors.append(f"client {n}, {what}: {result.status_code} {result.text[:200]}")
            return False
        return True

    titles: dict[int, str] = {}
    for k in range(JOBS_EACH):
        body = job_body(title=f"Baker {n}.{k}", status="active")
        created = client.simulate_post(JOBS, json=body, headers=auth)
        if expect(created, 201, "POST a job"):
            titles[created.json["id"]] = body["title"]
    ids = sorted(titles)
    for round_ in range(ROUNDS if ids else 0):
        for job_id in ids:
            read = client.simulate_get(f"{JOBS}/{job_id}", headers=auth)
            if expect(read, 200, f"GET job {job_id}"):
                seen = (read.json["id"], read.json["title"])
                if seen != (job_id, titles[job_id]):
                    mix.errors.append(f"client {n}: job {job_id} read as {seen}")
        job_id = ids[round_ % len(ids)]
        title = f"Baker {n}.{job_id}, round {round_}"
        written = client.simulate_put(f"{JOBS}/{job_id}", json={"title": title}, headers=auth)
        if expect(written, 200, f"PUT job {job_id}"):
            titles[job_id] = title
        listed = client.simulate_get(JOBS, headers=auth)
        if expect(listed, 200, "GET the list"):
            found = {j["id"]: j["title"] for j in listed.json["data"]}
            if found != titles:
                mix.errors.append(f"client {n}: the list shows {found}, not {titles}")
        application = {"name": f"Applicant {n}.{round_}", "email": f"a{n}.{round_}@example.org"}
        path = f"{JOBS}/{job_id}/applications"
        applied = client.simulate_post(path, json=application)
        if expect(applied, 202, f"apply to job {job_id}"):
            mix.applied.append(applied.json["id"])
