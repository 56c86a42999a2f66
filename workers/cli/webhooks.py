"""`jobpost webhooks list` (C12, C14): the endpoints of every employer, or of one."""

from __future__ import annotations

import argparse
import logging

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from models import webhooks
from models.entities import WebhookEndpoint
from models.unit_of_work import session_scope
from workers.cli.command import Command, out

log = logging.getLogger("jobpost.cli")


def webhooks_list(args: argparse.Namespace, command: Command) -> int:
    """Oldest first, without secrets; --json prints the API's shape of each, with its
    employer (the operator sees every employer's)."""
    query = select(WebhookEndpoint).order_by(WebhookEndpoint.id)
    if args.employer is not None:
        query = query.where(WebhookEndpoint.employer_id == args.employer)
    with session_scope(command.sessions) as s:
        found = [(e.employer_id, webhooks.shape(e)) for e in s.scalars(query)]
    data = [{**shape, "employerId": employer} for employer, shape in found]
    lines = [f"{'id':>6}  {'employer':>8}  {'status':<8}  {'events':<30}  url"]
    for w in data:
        events = ",".join(w["events"])
        lines.append(
            f"{w['id']:>6}  {w['employerId']:>8}  {w['status']:<8}  {events:<30}  {w['url']}"
        )
    out(args, {"data": data}, "\n".join(lines))
    return 0


def key_needed(command: Command) -> None:
    """Before a long-running process starts: stop with one line if webhooks exist and no key
    can read their secrets (C12). A database not migrated yet has none: nothing to check."""
    try:
        with session_scope(command.sessions) as s:
            webhooks.key_needed(s, command.settings)
    except DBAPIError as e:
        log.debug("webhook key not checked: %s", e)
