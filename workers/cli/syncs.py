"""`jobpost syncs` (C11, C14): the sync runs, one run, and cancelling one."""

from __future__ import annotations

import argparse
from typing import Any

from api import representations
from models.core.dates import utcnow
from models.db.unit_of_work import session_scope
from models.syncs import runs as syncs
from workers.cli.command import Command, out


def _line(run: dict[str, Any], employer_id: int) -> str:
    return (
        f"{run['id']:>7}  {employer_id:>8}  {run['mode']:<8} {run['status']:<9}"
        f"{' dry' if run['dryRun'] else '    '} {run['processed']:>7}/{run['total']:<7} "
        f"created {run['created']} updated {run['updated']} unchanged {run['unchanged']} "
        f"archived {run['archived']} failed {run['failed']}"
    )


def syncs_list(args: argparse.Namespace, command: Command) -> int:
    """Runs newest first, of one status or employer if given."""
    with session_scope(command.sessions) as s:
        rows, _ = syncs.listing(s.connection(), employer_id=args.employer, status=args.status)
    data = [representations.sync_run(r) for r in rows]
    header = f"{'id':>7}  {'employer':>8}  {'mode':<8} {'status':<9}     processed/total"
    lines = [header, *(_line(d, r.employer_id) for d, r in zip(data, rows, strict=True))]
    out(args, {"data": data}, "\n".join(lines))
    return 0


def syncs_show(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        row = syncs.read_any(s.connection(), args.id)
    run = representations.sync_run(row)
    out(args, run, _line(run, row.employer_id))
    return 0


def syncs_cancel(args: argparse.Namespace, command: Command) -> int:
    """As POST /syncs/{id}/cancel, for any employer's run; a finished one is an error (1)."""
    with session_scope(command.sessions) as s:
        row = syncs.cancel(s, None, args.id, now=utcnow())
    run = representations.sync_run(row)
    out(args, run, _line(run, row.employer_id))
    return 0
