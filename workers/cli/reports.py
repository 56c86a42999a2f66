"""`jobpost reports …`: the operator reads fraud reports and resolves them (C13, C14)."""

from __future__ import annotations

import argparse

from api import representations
from models import reports
from models.db.unit_of_work import session_scope
from workers import enqueue
from workers.cli.command import Command, out


def _line(r: reports.Shown) -> str:
    return f"{r.id:>6}  {r.status:<10}  job {r.job_id}  {r.reason:<14}  {r.details[:40]}"


def reports_list(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        found = reports.listing(s, args.status)
    text = "\n".join(["    id  status      job  reason          details", *map(_line, found)])
    out(args, {"data": [representations.report(r) for r in found]}, text)
    return 0


def reports_show(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        report = reports.shown(reports.get(s, args.id))
    shape = representations.report(report)
    out(args, shape, "\n".join(f"{k}: {v}" for k, v in shape.items()))
    return 0


def reports_resolve(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        resolved = reports.resolve(s, args.id, take_down=args.take_down, note=args.note)
    report = resolved.report
    if resolved.deliveries:  # committed: the workers may send them (else the sweeper does)
        enqueue.deliver_webhooks(command.celery, resolved.deliveries)
    said = "job taken down" if args.take_down else "dismissed"
    out(args, representations.report(report), f"Report {report.id}: {said}.")
    return 0
