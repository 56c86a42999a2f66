"""The Celery settings that keep C8's promises: nothing lost, nothing sent twice.

Redis re-delivers a task message that is not acknowledged within the visibility timeout, to
another worker, while the first may still be sending: the timeout must outlast anything a
task may take (its time limit) and any delay a message may carry (we carry none: retry times
live in the database, C8). A claimed entry's lease must outlast the time limit too, or the
sweeper would hand a live send to a second worker.
"""

from __future__ import annotations

import io
import threading
import tokenize
from pathlib import Path

import pytest
from celery import Celery

import workers
from models.core.settings import Settings
from workers.app import TaskContext, make_celery

REDIS = "redis://127.0.0.1:6379/0"
WORKERS = Path(workers.__file__).parent


def app_for(broker: str | None, tmp_path: Path) -> Celery:
    env = {"JOBPOST_VAR_DIR": str(tmp_path)}
    if broker is not None:
        env["CELERY_BROKER_URL"] = broker
    return make_celery(Settings.from_env(env))


@pytest.fixture
def redis_app(tmp_path: Path) -> Celery:
    return app_for(REDIS, tmp_path)


def test_the_visibility_timeout_outlasts_the_time_limit_and_the_lease(
    redis_app: Celery, tmp_path: Path
) -> None:
    conf = redis_app.conf
    visibility = conf.broker_transport_options["visibility_timeout"]
    lease = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}).outbox_lease_seconds
    assert conf.task_time_limit is not None and conf.task_time_limit > 0
    assert conf.task_soft_time_limit is not None
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit
    assert lease == 300  # C9's default
    assert lease > conf.task_time_limit  # C9: "longer than the task's time limit"
    assert visibility > conf.task_time_limit
    assert visibility > lease  # a dead worker's entry goes back through the sweeper first


def test_a_task_is_acknowledged_after_it_ran_and_one_at_a_time(redis_app: Celery) -> None:
    conf = redis_app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json"
    assert list(conf.accept_content) == ["json"]
    assert conf.task_ignore_result is True


def test_the_tasks_keep_the_app_settings(tmp_path: Path) -> None:
    """No task overrides acks-late, reject-on-worker-lost, the time limit or retries."""
    import workers.tasks  # noqa: F401  (declares the tasks: every app made has them)

    celery_app = app_for(None, tmp_path)

    for name in ("jobpost.deliver", "jobpost.sweep", "jobpost.expire", "jobpost.refresh"):
        task = celery_app.tasks[name]
        assert task.acks_late is True, name
        assert task.reject_on_worker_lost is True, name
        assert task.time_limit in (None, celery_app.conf.task_time_limit), name
        assert not getattr(task, "autoretry_for", ()), name
    assert celery_app.amqp.router.route({}, "jobpost.deliver")["queue"].name == "email"
    assert celery_app.amqp.router.route({}, "jobpost.sweep")["queue"].name == "maintenance"
    assert celery_app.amqp.router.route({}, "jobpost.sync")["queue"].name == "syncs"  # C11
    # C12: a backlog of webhooks never stands in front of the copies and reports.
    assert celery_app.amqp.router.route({}, "jobpost.deliver_webhook")["queue"].name == "webhooks"
    assert celery_app.amqp.router.route({}, "jobpost.deliver_report")["queue"].name == "email"


def test_the_embedded_broker_is_the_default(tmp_path: Path) -> None:
    app = app_for(None, tmp_path)
    assert app.conf.broker_url == f"sqla+sqlite:///{tmp_path}/broker.sqlite"
    # Polled: a worker with its one prefetched task done asks again soon, not a second later.
    with app.connection_for_read() as connection:
        assert connection.transport.polling_interval <= 0.2


DELAYS = {"countdown", "eta", "retry_backoff", "autoretry_for", "default_retry_delay"}


def _code_names(source: str) -> list[tuple[int, str]]:
    """The names and string literals of real code, comments and docstrings left out."""
    found: list[tuple[int, str]] = []
    previous = ""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME:
            if tok.string in DELAYS or (tok.string == "retry" and previous == "."):
                found.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and tok.string.strip("'\"") in DELAYS:
            found.append((tok.start[0], tok.string))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    return found


def test_no_task_message_carries_a_delay() -> None:
    """Retry waits live in the database (next_attempt_at, C8), never in a countdown or eta,
    a Redis message held beyond the visibility timeout, or a Task.retry."""
    offenders = []
    for path in sorted(WORKERS.rglob("*.py")):
        offenders += [f"{path.name}:{line}: {name}" for line, name in _code_names(path.read_text())]
    assert offenders == []


def test_the_source_check_would_notice_a_countdown() -> None:
    sample = 'app.send_task("x", countdown=5)\nself.retry(exc=e)\nopts = {"eta": now}\n'
    assert [name for _, name in _code_names(sample)] == ["countdown", "retry", '"eta"']
    assert _code_names('"""No countdown here."""\n# nor eta=\n') == []


def test_a_threads_pool_shares_one_engine_with_a_connection_per_thread(tmp_path: Path) -> None:
    """C12's delivery engine: every thread gets the same sessions (made once, whichever asks
    first), on an engine keeping as many connections as tasks run at once."""
    context = TaskContext(Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)}))
    context.size_pool(16)
    made: list[object] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        made.append(context.sessions())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(m) for m in made}) == 1
    engine = context.sessions().kw["bind"]
    try:
        assert engine.pool.size() == 16
    finally:
        engine.dispose()
