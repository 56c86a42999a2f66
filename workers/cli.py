"""The `jobpost` command line (C9): exit 0 on success, 1 on failure, 2 on a usage error."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.exc import DBAPIError

from models import employers, logs
from models.engines import database_said, make_engine
from models.errors import DomainError
from models.settings import Settings
from models.unit_of_work import session_scope, sessionmaker_for

Handler = Callable[[argparse.Namespace, Settings], int]


def out(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    """One JSON object on one line with --json, else the human text."""
    print(orjson.dumps(data).decode() if getattr(args, "json", False) else text)


def db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from models.migrate import upgrade

    upgrade(make_engine(settings.database_url))
    out(args, {"status": "ok"}, "Database is at the latest schema, reference data loaded.")
    return 0


def employers_create(args: argparse.Namespace, settings: Settings) -> int:
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        employer = employers.create_employer(s, args.name, args.plan)
        issued = employers.issue_key(s, employer.id)
    out(
        args,
        {"employerId": employer.id, "apiKey": issued.key},
        f"Employer {employer.id} ({employer.name}, {employer.plan}) created.\n"
        f"API key (shown once): {issued.key}",
    )
    return 0


def employers_list(args: argparse.Namespace, settings: Settings) -> int:
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        rows = [{"id": e.id, "name": e.name, "plan": e.plan} for e in employers.list_employers(s)]
    lines = [f"{r['id']:>6}  {r['plan']:<9}  {r['name']}" for r in rows]
    out(args, {"employers": rows}, "\n".join(["    id  plan       name", *lines]))
    return 0


def employers_set_plan(args: argparse.Namespace, settings: Settings) -> int:
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        employer = employers.set_plan(s, args.id, args.plan)
    out(
        args,
        {"employerId": employer.id, "plan": employer.plan},
        f"Employer {employer.id} is now on the {employer.plan} plan.",
    )
    return 0


def keys_create(args: argparse.Namespace, settings: Settings) -> int:
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        issued = employers.issue_key(s, args.employer_id)
    out(
        args,
        {"employerId": issued.employer_id, "apiKey": issued.key},
        f"API key for employer {issued.employer_id} (shown once): {issued.key}",
    )
    return 0


def keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        key = employers.revoke_key(s, args.prefix)
    out(args, {"prefix": key.prefix, "revoked": True}, f"Key {key.prefix} revoked.")
    return 0


SAMPLE_JOB = (
    '{"title": "Line Cook", "status": "active", "locations": [{"description": "Toronto, ON"}], '
    '"categories": [{"id": 12}], "positionType": {"id": 1}, '
    '"description": "<p>Join our <strong>kitchen</strong>.</p>", '
    '"applicantRoutingType": {"id": 1}, "applicationEmail": "hiring@example.com"}'
)


def demo(args: argparse.Namespace, settings: Settings) -> int:
    """For `make run`: a demo employer (unlimited plan) and a fresh key in var/demo-key."""
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        found = [e for e in employers.list_employers(s) if e.name == "Demo Employer"]
        employer = found[0] if found else employers.create_employer(s, "Demo Employer", "unlimited")
        issued = employers.issue_key(s, employer.id)
    path = var_dir() / "demo-key"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(issued.key + "\n")
    base = f"http://127.0.0.1:{args.port}/api/v1.1"
    key = f'-H "API-Key: $(cat {path})"'
    out(
        args,
        {"employerId": employer.id, "apiKey": issued.key},
        f"Demo employer {employer.id}; API key (also in {path}):\n  {issued.key}\n\nTry:\n"
        f"  curl -s {base}/positiontypes\n"
        f"  curl -s {key} -H 'Content-Type: application/json' -d '{SAMPLE_JOB}' {base}/jobs\n"
        f"  curl -s {key} '{base}/jobs?status=active'\n",
    )
    return 0


def var_dir() -> Path:
    return Path(os.environ.get("JOBPOST_VAR_DIR") or "var")


def serve(args: argparse.Namespace, settings: Settings) -> int:
    from api.server import serve as run

    run(args.host, args.port, args.workers, metrics_dir=settings.prometheus_multiproc_dir)
    return 0


CELERY_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")  # a line per task each


def worker(args: argparse.Namespace, settings: Settings) -> int:
    from api.server import prepare_metrics_dir

    # The processes that run tasks count them into files of this worker's own (C9), so this
    # is set before workers.tasks imports prometheus_client and before any pool forks.
    port = settings.worker_metrics_port
    prepare_metrics_dir(Path(settings.prometheus_multiproc_dir) / f"worker-{port}")
    from workers.app import EMAIL_QUEUE, MAINTENANCE_QUEUE, celery_app, worker_pool

    concurrency = args.concurrency or os.cpu_count() or 1
    # Celery takes a pool given by module path from its configuration, not its command line.
    celery_app.conf.worker_pool = worker_pool(concurrency)
    # A task run logs one JSON line of ours (workers.observability, C9); Celery's "received"
    # and "succeeded" lines at INFO would add two per task saying the same, and cost about as
    # much to write. Its warnings and errors still pass.
    for name in CELERY_TASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    queues = f"{EMAIL_QUEUE},{MAINTENANCE_QUEUE}"
    argv = ["worker", "-Q", queues, "--loglevel", "INFO", "--concurrency", str(concurrency)]
    celery_app.worker_main(argv)
    return 0


def beat(args: argparse.Namespace, settings: Settings) -> int:
    from workers.app import celery_app

    var_dir().mkdir(parents=True, exist_ok=True)
    schedule = str(var_dir() / "celerybeat-schedule")
    celery_app.start(["beat", "--loglevel", "INFO", "--schedule", schedule])
    return 0


def dev(args: argparse.Namespace, settings: Settings) -> int:
    from workers.dev import run

    return run(args.host, args.port, settings.smtp_host, settings.smtp_port, var_dir())


# --today's years: the tasks count days and seconds back and forth from it (refresh's 7 days,
# the purge's retention, the time zone's offset), which the first and last years cannot hold.
TODAY_YEARS = (1900, 9000)


def iso_date(text: str) -> str:
    """--today: anything but a real date written YYYY-MM-DD in TODAY_YEARS is a usage error
    (exit 2), caught before anything runs. date.fromisoformat alone also takes 20261201 and
    2026-W49-2."""
    try:
        if not re.fullmatch("[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
    first, last = TODAY_YEARS
    if not first <= day.year <= last:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year from {first} to {last}")
    return text


def _ops(name: str) -> Handler:
    def handler(args: argparse.Namespace, settings: Settings) -> int:
        from workers import ops

        return int(getattr(ops, name)(args, settings, out))

    return handler


def json_flag(c: argparse.ArgumentParser) -> None:
    """--json, before or after a subcommand (`outbox --json retry`, `outbox retry --json`):
    argparse writes a subcommand's defaults over what its parent parsed, so the flag has no
    default and sets `json` only when given; `out` takes it as absent otherwise."""
    c.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON object"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobpost", description="jobpost operations (C9).")
    sub = p.add_subparsers(dest="command", required=True)

    def cmd(parent: Any, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        c: argparse.ArgumentParser = parent.add_parser(name, help=help_text)
        c.set_defaults(handler=handler)
        json_flag(c)
        return c

    db = sub.add_parser("db", help="the database").add_subparsers(dest="db", required=True)
    cmd(db, "upgrade", db_upgrade, "migrate to the latest schema and load reference data")

    emp = sub.add_parser("employers", help="employers").add_subparsers(dest="sub", required=True)
    c = cmd(emp, "create", employers_create, "create an employer and its first key")
    c.add_argument("name")
    c.add_argument("--plan", choices=employers.PLANS, default="standard")
    cmd(emp, "list", employers_list, "list employers")
    c = cmd(emp, "set-plan", employers_set_plan, "change an employer's plan")
    c.add_argument("id", type=int)
    c.add_argument("plan", choices=employers.PLANS)

    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="sub", required=True)
    c = cmd(keys, "create", keys_create, "issue a new key to an employer")
    c.add_argument("employer_id", type=int)
    c = cmd(keys, "revoke", keys_revoke, "revoke a key by its 12-character prefix")
    c.add_argument("prefix")

    c = cmd(sub, "demo", demo, "create the demo employer if needed and issue it a fresh key")
    c.add_argument("--port", type=int, default=8000)

    c = cmd(sub, "serve", serve, "serve the API with gunicorn")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=8000)
    c.add_argument("--workers", type=int, default=os.cpu_count() or 1)

    c = cmd(sub, "worker", worker, "run a Celery worker on the email and maintenance queues")
    c.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="tasks at once (default: one per core); 1 runs them in the worker's own process",
    )
    cmd(sub, "beat", beat, "run the periodic task scheduler (exactly one per deployment)")
    c = cmd(sub, "dev", dev, "web, worker, beat and a local mail sink on embedded defaults")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=8000)

    tasks = sub.add_parser("tasks", help="periodic tasks").add_subparsers(dest="sub", required=True)
    c = cmd(tasks, "run", _ops("tasks_run"), "run one periodic task now, in this process")
    c.add_argument("task", choices=("expire", "refresh", "sweep", "purge"))
    c.add_argument(
        "--today",
        type=iso_date,
        help="the service date, YYYY-MM-DD (ignored by sweep; purge runs as at this time of day"
        " on that date)",
    )

    c = cmd(sub, "outbox", _ops("outbox_list"), "deliveries not yet sent (or of one status)")
    c.add_argument("--status", choices=("pending", "sending", "sent", "failed"))
    retry = c.add_subparsers(dest="sub").add_parser("retry", help="failed deliveries to pending")
    retry.set_defaults(handler=_ops("outbox_retry"))
    which = retry.add_mutually_exclusive_group(required=True)  # neither, or both: exit 2
    which.add_argument("application_id", nargs="?", type=int)
    which.add_argument("--all-failed", action="store_true")
    json_flag(retry)

    cmd(sub, "queues", _ops("queues"), "depth of each Celery queue and the workers seen")
    return p


SERVICES = ("serve", "worker", "beat", "dev")  # long-running: their logs are JSON lines (C9)


def setup_logging(command: str) -> None:
    if command in SERVICES:
        logs.configure(logging.INFO)
        logging.captureWarnings(True)  # warnings too leave as JSON lines
    else:  # the admin commands print to stdout; their few logs stay readable on stderr
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()  # a value it cannot use stops every command alike
        setup_logging(args.command)
        return int(args.handler(args, settings))
    except (DomainError, ValueError) as e:
        print(f"jobpost: {e}", file=sys.stderr)
        return 1
    except DBAPIError as e:  # the driver's own words, not a traceback of ours
        print(f"jobpost: {database_trouble(e)}", file=sys.stderr)
        return 1


def database_trouble(error: DBAPIError) -> str:
    """One line for an operator: what the database said, and what to do about a schema that
    is not there (a new database, or DATABASE_URL naming the wrong one)."""
    said = database_said(error)
    if getattr(error.orig, "sqlstate", None) == "42P01" or said.startswith("no such table"):
        return f"the database has no jobpost tables ({said}): run `jobpost db upgrade` first"
    return f"the database (DATABASE_URL) failed: {said}"


if __name__ == "__main__":
    sys.exit(main())
