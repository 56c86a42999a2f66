"""Operator commands (C9): run a periodic task now, inspect and retry the outbox, queues."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import date

from sqlalchemy import select

from models.applications import outbox
from models.core.dates import utcnow
from models.core.settings import is_redis
from models.db.entities import Application, OutboxEntry
from models.db.unit_of_work import session_scope
from workers import broker, enqueue
from workers.cli.command import Command, out

UNSENT = ("pending", "sending", "failed", "undeliverable")  # not at the employer (C8, C22)
PERIODIC_TASKS = ("expire", "refresh", "sweep", "purge", "notify", "digests")
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


def tasks_run(args: argparse.Namespace, command: Command) -> int:
    """One periodic task, now, in this process, as its Celery task runs it; --today sets the
    service date (C9)."""
    # Imported here, not with the command line: `jobpost serve`'s master would hand the
    # tasks' imports (SMTP, HTTP, cryptography) to every web worker it forks (issue 15).
    from workers.tasks import (
        run_digests,
        run_expire,
        run_notify,
        run_purge,
        run_refresh,
        run_sweep,
    )

    today = date.fromisoformat(args.today) if args.today else None
    sessions, settings = command.sessions, command.settings
    if args.task == "expire":
        changed = run_expire(sessions, settings, today)
    elif args.task == "refresh":  # expiry first, as the Celery task (C5)
        changed = run_refresh(sessions, settings, today)
    elif args.task == "sweep":
        changed = run_sweep(sessions, settings, today, celery=command.celery)
    elif args.task == "notify":  # C18
        changed = run_notify(sessions, settings, today)
    elif args.task == "digests":  # C19: queued and enqueued, sent by the email workers
        changed = run_digests(sessions, settings, today, celery=command.celery)
    else:
        changed = run_purge(sessions, settings, today)
    out(args, {"task": args.task, "changed": changed}, f"{args.task}: {changed} changed")
    return 0


def outbox_list(args: argparse.Namespace, command: Command) -> int:
    statuses = (args.status,) if args.status else UNSENT
    with session_scope(command.sessions) as s:
        rows = s.execute(
            select(Application, OutboxEntry)
            .join(OutboxEntry)
            .where(OutboxEntry.status.in_(statuses))
            .order_by(Application.id)
        ).all()
        entries = [
            {
                "application": a.id,
                "job": a.job_id,
                "recipient": a.application_email,
                "status": o.status,
                "attempts": o.attempts,
                "lastError": o.last_error,
            }
            for a, o in rows
        ]
    lines = [
        f"{'application':>11}  {'job':>6}  {'status':<13} {'attempts':>8}  "
        f"{'recipient':<30} last error"
    ]
    for e in entries:
        lines.append(
            f"{e['application']:>11}  {e['job'] or '-':>6}  {e['status']:<13} "
            f"{e['attempts']:>8}  {e['recipient']:<30} {e['lastError'] or ''}"
        )
    out(args, {"entries": entries}, "\n".join(lines))
    return 0


def outbox_retry(args: argparse.Namespace, command: Command) -> int:
    """Failed entries back to pending, and enqueued (C9)."""
    if args.application_id is None and not args.all_failed:
        raise ValueError("name an APPLICATION_ID or --all-failed")
    with session_scope(command.sessions) as s:
        ids = outbox.retry_failed(s, args.application_id, now=utcnow())
    if args.application_id is not None and not ids:
        raise ValueError(f"application {args.application_id} has no failed delivery")
    queued = sum(enqueue.deliver(command.celery, i) for i in ids)
    out(
        args,
        {"retried": ids, "enqueued": queued},
        f"{len(ids)} failed deliveries back to pending; {queued} enqueued"
        + ("" if queued == len(ids) else " (the sweeper enqueues the rest)"),
    )
    return 0


def queues(args: argparse.Namespace, command: Command) -> int:
    settings = command.settings
    try:
        depths = broker.depths(settings.broker_url)
    except Exception as e:  # kombu's, redis-py's and SQLAlchemy's errors alike
        print(f"jobpost queues: the broker does not answer: {e}", file=sys.stderr)
        return 1
    workers: list[str] | None = None
    if is_redis(settings.broker_url):
        replies = command.celery.control.inspect(timeout=1.0).ping() or {}
        workers = sorted(replies)
    lines = [f"{name:<12} {n:>8} waiting" for name, n in depths.items()]
    lines.append(
        "workers: "
        + (
            ", ".join(workers)
            if workers
            else "none seen"
            if workers is not None
            else "not visible on this broker (Redis shows them)"
        )
    )
    out(args, {"queues": depths, "workers": workers}, "\n".join(lines))
    return 0
