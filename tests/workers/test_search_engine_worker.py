"""C18 end to end: a real `celery worker` process, configured by its environment as an
operator would, runs the periodic task that sends the queued notifications to local engines
checking the protocols (tests.notifications.engines); both databases and both brokers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from models import employers
from models.core.dates import today_in
from models.db.unit_of_work import session_scope
from models.jobs import writes as jobs
from models.notifications import channels
from models.notifications import queue as notifications
from tests.factories import job_body
from tests.harness import wait_for
from tests.notifications.conftest import BASE, KEY, service_account
from tests.notifications.engines import Engines, serving
from tests.workers.stacks import MAIN_STACKS, Stack
from tests.workers.stacks import postgres_template as postgres_template
from tests.workers.stacks import sqlite_template as sqlite_template
from tests.workers.stacks import stack as stack
from workers.app import MAINTENANCE_QUEUE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def engines(key: rsa.RSAPrivateKey) -> Iterator[Engines]:
    with serving(key.public_key()) as found:
        yield found
    channels.install(channels.OFF)


@pytest.mark.parametrize("stack", MAIN_STACKS, indirect=True)
def test_a_worker_tells_both_engines_of_a_published_job(
    stack: Stack, engines: Engines, key: rsa.RSAPrivateKey
) -> None:
    account = service_account(stack.workdir / "account.json", key, engines.url("/token"))
    env = {
        "PUBLIC_BASE_URL": BASE,
        "INDEXNOW_KEY": KEY,
        "INDEXNOW_ENDPOINT": engines.url("/indexnow"),
        "GOOGLE_SERVICE_ACCOUNT_FILE": str(account),
        "GOOGLE_INDEXING_ENDPOINT": engines.url("/publish"),
    }
    # The write, as the web process would make it with these settings.
    channels.install(channels.Channels(BASE, (channels.INDEXNOW, channels.GOOGLE)))
    with session_scope(stack.sessions) as s:
        employer = employers.create_employer(s, "Maple Corp")
        body = job_body(status="active")
        job = jobs.create(s, employer, body, today=today_in(stack.settings.timezone)).id
    urls = [f"{BASE}/jobs/{job}?lang={code}" for code in ("en", "fr")]
    stack.start_worker(1, extra=env)
    stack.celery.send_task("jobpost.notify_search_engines", queue=MAINTENANCE_QUEUE)
    wait_for(
        lambda: len(engines.published) == 2 and engines.indexnow,
        timeout=60,
        what="both engines to be told",
    )
    assert engines.refused == []
    assert engines.indexnow[0]["urlList"] == urls
    assert engines.indexnow[0]["keyLocation"] == f"{BASE}/{KEY}.txt"
    assert sorted(p["url"] for p in engines.published) == sorted(urls)
    assert {p["type"] for p in engines.published} == {"URL_UPDATED"}
    assert len(engines.claims) == 1  # the JWT the worker signed, verified

    def all_sent() -> bool:
        with stack.sessions() as s:
            found = notifications.counts(s)
        return all(found[c]["sent"] == 2 for c in channels.CHANNELS)

    wait_for(all_sent, timeout=30, what="the notifications marked sent")
