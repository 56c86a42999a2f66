"""Asking the broker (C9), on the embedded broker (kombu's SQLAlchemy transport on a SQLite
file, the default) and on a Redis that is not there: `/readyz`'s broker check, the queue depths
of `jobpost queues` and `/metrics`. A broker that does not answer is reported as such, never
as empty queues."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from celery import Celery

from models.core.settings import Settings
from tests.harness import RedisServer
from tests.workers.processes import jobpost
from workers import broker, enqueue
from workers.app import make_celery


def unopenable(tmp_path: Path) -> str:
    """An embedded broker whose folder cannot be made: a file stands in its way."""
    (tmp_path / "in-the-way").write_text("")
    return f"sqla+sqlite:///{tmp_path / 'in-the-way' / 'broker.sqlite'}"


def embedded(tmp_path: Path) -> str:
    return f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"


def celery_on(url: str) -> Celery:
    return make_celery(Settings.from_env({"CELERY_BROKER_URL": url}), publisher=True)


def test_the_embedded_broker_answers_and_counts_what_waits(tmp_path: Path) -> None:
    url = embedded(tmp_path)
    broker.ping(url, 2)
    assert broker.depths(url) == {"email": 0, "maintenance": 0, "syncs": 0, "webhooks": 0}
    celery = celery_on(url)
    assert enqueue.deliver(celery, 1) and enqueue.deliver(celery, 2)
    celery.send_task("jobpost.expire")
    assert broker.depths(url) == {"email": 2, "maintenance": 1, "syncs": 0, "webhooks": 0}


def test_an_embedded_broker_that_cannot_open_its_database_fails_the_checks(
    tmp_path: Path,
) -> None:
    url = unopenable(tmp_path)
    with pytest.raises(Exception, match="unable to open database file"):
        broker.ping(url, 2)
    with pytest.raises(Exception, match="unable to open database file"):
        broker.depths(url)


def test_a_redis_broker_that_is_not_there_fails_the_checks_within_the_timeout(
    unused_port: int,
) -> None:
    url = f"redis://127.0.0.1:{unused_port}/0"
    started = time.monotonic()
    with pytest.raises(Exception, match="onnect"):
        broker.ping(url, 1)
    with pytest.raises(Exception, match="onnect"):
        broker.depths(url, 1)
    assert time.monotonic() - started < 10


# /readyz of the web app `jobpost serve` runs (api.app.get_app), in a process of its own; the
# first argument, when "no-packaging", makes `packaging` impossible to import first, as in the
# image whose lock lacked kombu's `redis` extra (issue 27).
READYZ = (
    "import sys\n"
    "if sys.argv[1] == 'no-packaging': sys.modules['packaging'] = None\n"
    "from falcon import testing; from api.app import get_app\n"
    "answer = testing.TestClient(get_app()).simulate_get('/readyz')\n"
    "print(answer.status_code, answer.json.get('detail', ''))\n"
    "print([m for m in ('kombu.transport.redis', 'celery.app.base') if m in sys.modules])\n"
)


def readyz(tmp_path: Path, broker_url: str, *, packaging: bool = True) -> list[str]:
    env = {"CELERY_BROKER_URL": broker_url, "JOBPOST_VAR_DIR": str(tmp_path), "PATH": "/bin"}
    env["READY_TIMEOUT_SECONDS"] = "1"
    argv = [sys.executable, "-c", READYZ, "with" if packaging else "no-packaging"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_readyz_hands_redis_to_the_workers_transport_without_celery(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """/readyz loads and connects kombu's Redis transport, the one tasks leave by; Celery's
    app is still made only by the first task sent (issue 15)."""
    assert readyz(tmp_path, redis_server.url) == ["200 ", "['kombu.transport.redis']"]


def test_readyz_names_the_broker_whose_transport_cannot_load(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Redis answers, but the transport the workers use cannot be imported: no task could
    leave, so the web is not ready (issue 27: a PING with redis-py alone said 200)."""
    status, _ = readyz(tmp_path, redis_server.url, packaging=False)
    assert status == "503 Not ready: broker (ModuleNotFoundError)."


def test_readyz_names_the_broker_whose_server_is_down(unused_port: int, tmp_path: Path) -> None:
    started = time.monotonic()
    status, _ = readyz(tmp_path, f"redis://127.0.0.1:{unused_port}/0")
    assert status == "503 Not ready: broker (OperationalError)."
    assert time.monotonic() - started < 30  # READY_TIMEOUT_SECONDS=1, and a Python start


def test_queue_depths_on_redis_count_every_priority_without_kombu(
    redis_server: RedisServer,
) -> None:
    """/metrics and `jobpost queues` read kombu's lists with redis-py alone (issue 15): a
    task sent with a priority waits in a list of its own, and is counted too."""
    celery = celery_on(redis_server.url)
    assert enqueue.deliver(celery, 1) and enqueue.deliver(celery, 2)
    celery.send_task("jobpost.expire")
    celery.send_task("jobpost.expire", priority=9)
    script = (
        f"import sys; from workers import broker; print(broker.depths({redis_server.url!r}, 2));"
        "print([m for m in ('kombu.connection', 'celery.app.base') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        str({"email": 2, "maintenance": 2, "syncs": 0, "webhooks": 0}),
        "[]",
    ]
    client = redis.Redis.from_url(redis_server.url)
    assert client.llen("maintenance") == 1  # the other one waits in the priority 9 list
    client.close()


@pytest.mark.parametrize("where", ["embedded", "redis"])
def test_jobpost_queues_says_the_broker_does_not_answer_and_exits_1(
    tmp_path: Path, where: str, unused_port: int
) -> None:
    url = unopenable(tmp_path) if where == "embedded" else f"redis://127.0.0.1:{unused_port}/0"
    env = {"CELERY_BROKER_URL": url, "PATH": "/usr/bin:/bin", "JOBPOST_VAR_DIR": "/tmp"}
    for argv in (["queues"], ["queues", "--json"]):
        done = jobpost(env, *argv)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.startswith("jobpost queues: the broker does not answer:")
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_jobpost_queues_on_the_embedded_broker(tmp_path: Path) -> None:
    url = embedded(tmp_path)
    enqueue.deliver(celery_on(url), 7)
    env = {"CELERY_BROKER_URL": url, "PATH": "/usr/bin:/bin", "JOBPOST_VAR_DIR": str(tmp_path)}
    done = jobpost(env, "queues", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["queues"] == {
        "email": 1,
        "maintenance": 0,
        "syncs": 0,
        "webhooks": 0,
    }


def test_the_embedded_broker_makes_its_folder(tmp_path: Path) -> None:
    """A fresh JOBPOST_VAR_DIR: whichever process asks first (here `jobpost queues`'s
    question, or a web process enqueueing) makes the folder, as the database's is made."""
    url = f"sqla+sqlite:///{tmp_path / 'var' / 'nested' / 'broker.sqlite'}"
    assert broker.depths(url) == {"email": 0, "maintenance": 0, "syncs": 0, "webhooks": 0}
    assert (tmp_path / "var" / "nested" / "broker.sqlite").exists()
    other = f"sqla+sqlite:///{tmp_path / 'other' / 'broker.sqlite'}"
    assert enqueue.deliver(celery_on(other), 3)
    assert broker.depths(other)["email"] == 1
