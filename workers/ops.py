"""Operator commands (C9): run a periodic task now, inspect and retry the outbox, queues."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from typing import Any

from sqlalchemy import select

from models import outbox
from models.dates import utcnow
from models.entities import Application, OutboxEntry
from models.settings import Settings, is_redis
from models.unit_of_work import session_scope, sessionmaker_for

UNSENT = ("pending", "sending", "failed")


def tasks_run(args: argparse.Namespace, settings: Settings, out: Any) -> int:
    """One periodic task, now, in this process; --today sets the service date (C9)."""
    from workers.tasks import RUNNERS

    today = date.fromisoformat(args.today) if args.today else None
    factory = sessionmaker_for(settings.database_url)
    if args.task == "refresh":  # expiry runs before refresh (C5)
        RUNNERS["expire"](factory, settings, today)
    changed = RUNNERS[args.task](factory, settings, today)
    out(args, {"task": args.task, "changed": changed}, f"{args.task}: {changed} changed")
    return 0


def outbox_list(args: argparse.Namespace, settings: Settings, out: Any) -> int:
    statuses = (args.status,) if args.status else UNSENT
    with session_scope(sessionmaker_for(settings.database_url)) as s:
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
        f"{'application':>11}  {'job':>6}  {'status':<8} {'attempts':>8}  "
        f"{'recipient':<30} last error"
    ]
    for e in entries:
        lines.append(
            f"{e['application']:>11}  {e['job'] or '-':>6}  {e['status']:<8} "
            f"{e['attempts']:>8}  {e['recipient']:<30} {e['lastError'] or ''}"
        )
    out(args, {"entries": entries}, "\n".join(lines))
    return 0


def outbox_retry(args: argparse.Namespace, settings: Settings, out: Any) -> int:
    """Failed entries back to pending, and enqueued (C9)."""
    from workers import enqueue
    from workers.app import celery_app

    if args.application_id is None and not args.all_failed:
        raise ValueError("name an APPLICATION_ID or --all-failed")
    with session_scope(sessionmaker_for(settings.database_url)) as s:
        ids = outbox.retry_failed(s, args.application_id, now=utcnow())
    if args.application_id is not None and not ids:
        raise ValueError(f"application {args.application_id} has no failed delivery")
    queued = sum(enqueue.deliver(celery_app, i) for i in ids)
    out(
        args,
        {"retried": ids, "enqueued": queued},
        f"{len(ids)} failed deliveries back to pending; {queued} enqueued"
        + ("" if queued == len(ids) else " (the sweeper enqueues the rest)"),
    )
    return 0


def queues(args: argparse.Namespace, settings: Settings, out: Any) -> int:
    from workers import broker
    from workers.app import celery_app

    try:
        depths = broker.depths(settings.broker_url)
    except Exception as e:  # kombu's, redis-py's and SQLAlchemy's errors alike
        print(f"jobpost queues: the broker does not answer: {e}", file=sys.stderr)
        return 1
    workers: list[str] | None = None
    if is_redis(settings.broker_url):
        replies = celery_app.control.inspect(timeout=1.0).ping() or {}
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
