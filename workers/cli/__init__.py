"""The `jobpost` command line (C9): exit 0 on success, 1 on failure, 2 on a usage error.

`main` is the entry point of every command: it reads the settings once and hands them, in a
`Command`, to the command's handler. The handlers live by what the operator does: the
database and the demo (`database`), employers and keys (`employers`), the long-running
services (`services`), and operations on tasks, the outbox and the queues (`operations`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError

from api import representations
from models.applications import outbox
from models.core import logs
from models.core.errors import DomainError, ValidationFailed
from models.core.i18n import DEFAULT, LANGUAGES
from models.core.settings import Settings
from models.db.engines import database_said
from models.employers import PLANS
from models.jobs import compliance
from models.notifications import channels as search_engines
from models.syncs.runs import STATUSES
from models.webhooks import payloads
from models.webhooks.secrets import MissingKey
from workers.cli import (
    applications,
    database,
    employers,
    notifications,
    operations,
    reports,
    services,
    syncs,
    webhooks,
)
from workers.cli.command import Command, Handler, json_flag


def _queues(raw: str) -> list[str]:
    """`jobpost worker --queues`: some of workers.app.QUEUES, comma-separated."""
    from workers.app import QUEUES

    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in QUEUES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"{raw!r}: name some of {', '.join(QUEUES)}, comma-separated"
        )
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobpost", description="jobpost operations (C9).")
    sub = p.add_subparsers(dest="command", required=True)

    def cmd(parent: Any, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        c: argparse.ArgumentParser = parent.add_parser(name, help=help_text)
        c.set_defaults(handler=handler)
        json_flag(c)
        return c

    db = sub.add_parser("db", help="the database").add_subparsers(dest="db", required=True)
    cmd(db, "upgrade", database.db_upgrade, "migrate to the latest schema and load reference data")

    emp = sub.add_parser("employers", help="employers").add_subparsers(dest="sub", required=True)
    c = cmd(emp, "create", employers.employers_create, "create an employer and its first key")
    c.add_argument("name")
    c.add_argument("--plan", choices=PLANS, default="standard")
    c.add_argument("--language", choices=LANGUAGES, default=DEFAULT, help="of its emails (C13)")
    cmd(emp, "list", employers.employers_list, "list employers")
    c = cmd(emp, "set", employers.employers_set, "change an employer's settings (C13)")
    c.add_argument("id", type=int)
    c.add_argument("--language", choices=LANGUAGES, help="of the emails it receives")
    c.add_argument("--compliance", choices=compliance.MODES)
    c.add_argument("--ontario-25-plus", choices=("yes", "no"), dest="ontario25_plus")
    c.add_argument("--email-knocked-out", choices=("yes", "no"), dest="email_knocked_out")
    c = cmd(emp, "set-plan", employers.employers_set_plan, "change an employer's plan")
    c.add_argument("id", type=int)
    c.add_argument("plan", choices=PLANS)

    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="sub", required=True)
    c = cmd(keys, "create", employers.keys_create, "issue a new key to an employer")
    c.add_argument("employer_id", type=int)
    c.add_argument("--scopes", help="comma-separated (C23); default: every scope")
    c.add_argument("--expires", help="RFC 3339, e.g. 2027-06-30T00:00:00Z; default: never")
    c = cmd(keys, "list", employers.keys_list, "an employer's live keys (C23)")
    c.add_argument("employer_id", type=int)
    c = cmd(keys, "revoke", employers.keys_revoke, "revoke a key by its 12-character prefix")
    c.add_argument("prefix")

    c = cmd(
        sub, "demo", database.demo, "create the demo employer if needed and issue it a fresh key"
    )
    c.add_argument("--port", type=int, default=8000)

    # None: not given, so GUNICORN_CMD_ARGS' or jobpost's own default applies (api.server).
    c = cmd(sub, "serve", services.serve, "serve the API with gunicorn")
    c.add_argument("--host", default=None)
    c.add_argument("--port", type=int, default=None)
    c.add_argument("--workers", type=int, default=None)

    c = cmd(
        sub,
        "worker",
        services.worker,
        "run a Celery worker on the email, maintenance, syncs and webhooks queues",
    )
    c.add_argument(
        "--queues",
        type=_queues,
        default=None,
        help="the queues to consume, comma-separated (default: all four); a worker of its own"
        " for webhooks: --queues webhooks --pool threads",
    )
    c.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="tasks at once (default: one per core); 1 runs them in the worker's own process",
    )
    c.add_argument(
        "--pool",
        choices=("solo", "prefork", "threads"),
        default=None,
        help="how tasks run at once: threads overlap network waits in one process (default:"
        " solo for concurrency 1, else prefork); see docs/operations.md",
    )
    c.add_argument(
        "--name",
        default=None,
        help="the worker's node name, as Celery's -n (default: jobpost-<pid>@<host>)",
    )
    cmd(sub, "beat", services.beat, "run the periodic task scheduler (exactly one per deployment)")
    c = cmd(
        sub,
        "bounces",
        services.bounces,
        "run the SMTP server of BOUNCE_DOMAIN, which takes the copies' delivery reports (C22)",
    )
    c.add_argument("--host", default="0.0.0.0")
    c.add_argument("--port", type=int, default=2525)
    c = cmd(
        sub, "dev", services.dev, "web, worker, beat and a local mail sink on embedded defaults"
    )
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=8000)

    tasks = sub.add_parser("tasks", help="periodic tasks").add_subparsers(dest="sub", required=True)
    c = cmd(tasks, "run", operations.tasks_run, "run one periodic task now, in this process")
    c.add_argument("task", choices=operations.PERIODIC_TASKS)
    c.add_argument(
        "--today",
        type=operations.iso_date,
        help="the service date, YYYY-MM-DD (ignored by sweep and digests; purge runs as at this"
        " time of day on that date)",
    )

    c = cmd(sub, "outbox", operations.outbox_list, "deliveries not yet sent (or of one status)")
    c.add_argument("--status", choices=outbox.COPY_STATUSES)
    retry = c.add_subparsers(dest="sub").add_parser("retry", help="failed deliveries to pending")
    retry.set_defaults(handler=operations.outbox_retry)
    which = retry.add_mutually_exclusive_group(required=True)  # neither, or both: exit 2
    which.add_argument("application_id", nargs="?", type=int)
    which.add_argument("--all-failed", action="store_true")
    json_flag(retry)

    c = cmd(sub, "reports", reports.reports_list, "fraud reports (all, or of one status)")
    c.add_argument("--status", choices=("open", "dismissed", "taken_down"))
    more = c.add_subparsers(dest="sub")
    show = more.add_parser("show", help="one report")
    show.set_defaults(handler=reports.reports_show)
    show.add_argument("id", type=int)
    json_flag(show)
    resolve = more.add_parser("resolve", help="dismiss a report, or take its job down")
    resolve.set_defaults(handler=reports.reports_resolve)
    resolve.add_argument("id", type=int)
    how = resolve.add_mutually_exclusive_group(required=True)
    how.add_argument("--dismiss", action="store_true")
    how.add_argument("--take-down", action="store_true")
    resolve.add_argument("--note")
    json_flag(resolve)

    apps = sub.add_parser("applications", help="an applicant's data (C13 Privacy)")
    app = apps.add_subparsers(dest="sub", required=True)
    c = cmd(app, "export", applications.applications_export, "print all held for an address")
    c.add_argument("--email", required=True, type=applications.address, help="any case")
    c = cmd(app, "erase", applications.applications_erase, "erase all held for an address")
    c.add_argument("--email", required=True, type=applications.address, help="any case")

    cmd(sub, "queues", operations.queues, "depth of each Celery queue and the workers seen")

    c = cmd(sub, "syncs", syncs.syncs_list, "sync runs, newest first (C11)")
    c.add_argument("--status", choices=STATUSES)
    c.add_argument("--employer", type=int)
    runs = c.add_subparsers(dest="sub")
    show = runs.add_parser("show", help="one sync run")
    show.set_defaults(handler=syncs.syncs_show)
    show.add_argument("id", type=int)
    json_flag(show)
    cancel = runs.add_parser("cancel", help="cancel an open, queued or running run")
    cancel.set_defaults(handler=syncs.syncs_cancel)
    cancel.add_argument("id", type=int)
    json_flag(cancel)
    c = cmd(sub, "notifications", notifications.notifications_list, "search-engine notifications")
    c.add_argument("--limit", type=int, default=20, help="waiting ones shown a channel (20)")
    hooks = sub.add_parser("webhooks", help="webhook endpoints (C12)")
    hook = hooks.add_subparsers(dest="sub", required=True)
    c = cmd(hook, "list", webhooks.webhooks_list, "webhook endpoints, oldest first, no secrets")
    c.add_argument("--employer", type=int, help="only this employer's")
    c = cmd(hook, "deliveries", webhooks.deliveries, "an endpoint's deliveries, newest first")
    c.add_argument("webhook_id", type=int)
    c = cmd(hook, "retry", webhooks.deliveries_retry, "failed deliveries sent again, schedule anew")
    c.add_argument("webhook_id", type=int)
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("message_id", nargs="?")
    which.add_argument("--all-failed", action="store_true")
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
    command: Command | None = None
    try:
        # Read once, here, for the whole command; a value it cannot use stops every
        # command alike.
        command = Command(Settings.from_env())
        setup_logging(args.command)
        payloads.install(representations)  # events a command emits carry the API's shapes
        search_engines.install(search_engines.of_settings(command.settings))  # C18
        return int(args.handler(args, command))
    except (DomainError, ValueError, MissingKey) as e:
        entries = e.errors if isinstance(e, ValidationFailed) else []
        print(
            f"jobpost: {e}",
            *(f"  {x.field}: {x.message}" for x in entries),
            file=sys.stderr,
            sep="\n",
        )
        return 1
    except DBAPIError as e:  # the driver's own words, not a traceback of ours
        print(f"jobpost: {database_trouble(e)}", file=sys.stderr)
        return 1
    finally:
        if command is not None:
            command.close()


def database_trouble(error: DBAPIError) -> str:
    """One line for an operator: what the database said, and what to do about a schema that
    is not there (a new database, or DATABASE_URL naming the wrong one)."""
    said = database_said(error)
    if getattr(error.orig, "sqlstate", None) == "42P01" or said.startswith("no such table"):
        return f"the database has no jobpost tables ({said}): run `jobpost db upgrade` first"
    return f"the database (DATABASE_URL) failed: {said}"
