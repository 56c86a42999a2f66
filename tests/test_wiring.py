"""One wiring point per process: each entry point (gunicorn's `api.app:get_app()`, each
`jobpost` command, the worker and beat) reads the settings once and passes them down, so
importing a module reads, configures and builds nothing (issue 14)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "api").rglob("*.py")), *sorted((ROOT / "models").rglob("*.py"))]
SOURCES += [*sorted((ROOT / "workers").rglob("*.py")), ROOT / "beat_schedule.py"]
READER = ROOT / "models" / "core" / "settings.py"  # Settings.from_env: the one place


def environment_reads(source: str) -> list[int]:
    """The lines that read the environment: os.environ (but as the target of an assignment:
    PROMETHEUS_MULTIPROC_DIR, set for prometheus_client, which reads it), os.getenv, and
    either imported from os."""
    tree = ast.parse(source)
    written = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            if id(node) not in written:
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [node.lineno for a in node.names if a.name in ("environ", "getenv")]
    return found


def test_only_models_settings_reads_the_environment() -> None:
    readers = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCES
        if path != READER
        for line in environment_reads(path.read_text())
    ]
    assert readers == []
    assert environment_reads(READER.read_text())  # the check sees a read where there is one


def test_the_check_tells_a_read_from_a_write() -> None:
    assert environment_reads('import os\nos.environ["X"] = "1"\n') == []
    assert environment_reads('import os\nx = os.environ.get("X")\n') == [2]
    assert environment_reads('import os\nx = os.environ["X"]\n') == [2]
    assert environment_reads('import os\nx = os.getenv("X")\n') == [2]
    assert environment_reads("from os import environ\n") == [1]


# Scripts run by a tool rather than imported: alembic's migration environment, and
# `python -m workers.cli`, which runs the command line.
SCRIPTS = {"models.db.migrations.env", "workers.cli.__main__"}

IMPORT_ALL = """
import gc, importlib, sys
from celery import Celery
from sqlalchemy import Engine
for name in sys.argv[1:]:
    importlib.import_module(name)
gc.collect()
made = [type(o).__name__ for o in gc.get_objects() if issubclass(type(o), (Celery, Engine))]
print(len(sys.argv) - 1, made)
"""


def test_importing_every_module_reads_configures_and_builds_nothing(tmp_path: Path) -> None:
    """With settings no process could start on, every module still imports: none reads them,
    none makes a Celery app or a database engine, none makes a folder."""
    modules = sorted(
        {
            ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for path in SOURCES
        }
        - SCRIPTS
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JOBPOST_")},
        "JOBPOST_VAR_DIR": str(tmp_path / "var"),
        "APPLY_RATE_LIMIT": "10/fortnight",
        "SMTP_STARTTLS": "ture",
        "DATABASE_URL": "mysql://nobody@nowhere/none",
        "CELERY_BROKER_URL": f"sqla+sqlite:///{tmp_path}/broker/broker.sqlite",
    }
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *modules],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1) == [str(len(modules)), "[]\n"]
    assert list(tmp_path.iterdir()) == []
    assert len(modules) > 40  # every package was walked


def test_the_web_app_loads_cryptography_only_when_a_secret_is_used() -> None:
    """Each web process stays under its memory bound (issue 15): Fernet is imported by the
    first webhook secret written or read, not by every worker at start."""
    script = (
        "import sys, api.app, models.webhooks.secrets as s; print('cryptography' in sys.modules);"
        "s.decrypt(s.encrypt('x', b'A' * 43 + b'='), b'A' * 43 + b'=');"
        "print('cryptography' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


# What a web worker needs no part of at start: Celery's app (and kombu, its transports), the
# tasks, and what they import to send mail and webhooks.
NOT_FOR_THE_WEB = ("celery.app.base", "kombu.connection", "workers.tasks", "cryptography")


def loaded(script: str, env: dict[str, str] | None = None) -> list[str]:
    """Which of NOT_FOR_THE_WEB a fresh Python has imported after `script`."""
    check = f"import sys; print([m for m in {NOT_FOR_THE_WEB!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", f"{script}\n{check}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return list(ast.literal_eval(done.stdout.strip().splitlines()[-1]))


def test_jobpost_serve_hands_its_web_workers_no_celery_app_nor_tasks() -> None:
    """gunicorn's workers are forks of `jobpost serve`'s process: whatever the command line
    imports is resident in each of them (issue 15, docs/benchmarks.md)."""
    assert loaded("import workers.cli") == []
    assert loaded("import workers.cli, workers.tasks") == list(NOT_FOR_THE_WEB)  # it can tell


def test_a_web_process_makes_its_celery_app_with_the_first_task_it_sends(
    tmp_path: Path,
) -> None:
    """The web process's wiring (api.app.get_app) makes no Celery app at start: a worker that
    only serves jobs never sends a task; the first task sent makes it, and it is sent."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JOBPOST_")},
        "JOBPOST_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'jobpost.db'}",
        "CELERY_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    }
    assert loaded("from api.app import get_app; get_app()", env) == []
    sent = (
        "from models.core.settings import Settings; from workers import broker, enqueue\n"
        "publisher = enqueue.Publisher(Settings.from_env())\n"
        "assert enqueue.deliver(publisher.app, 7) and publisher.app is publisher.app\n"
        "assert broker.depths(publisher.settings.broker_url)['email'] == 1"
    )
    assert loaded(sent, env) == ["celery.app.base", "kombu.connection"]
