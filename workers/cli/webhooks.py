"""`jobpost webhooks list|deliveries|retry` (C12, C14): the endpoints of every employer, or
of one; an endpoint's deliveries; failed ones sent again with the retry schedule anew."""

from __future__ import annotations

import argparse
import logging

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from api import representations  # the API's own shapes (C14)
from models.core.dates import utcnow
from models.db.entities import WebhookEndpoint
from models.db.unit_of_work import session_scope
from models.webhooks import delivery as webhook_delivery
from models.webhooks import delivery_log as delivery_log
from models.webhooks import endpoints as webhooks
from workers import enqueue
from workers.cli.command import Command, out

log = logging.getLogger("jobpost.cli")
EVERY = 1_000_000  # an operator's listing is not paged


def webhooks_list(args: argparse.Namespace, command: Command) -> int:
    """Oldest first, without secrets; --json prints the API's shape of each, with its
    employer (the operator sees every employer's)."""
    query = select(WebhookEndpoint).order_by(WebhookEndpoint.id)
    if args.employer is not None:
        query = query.where(WebhookEndpoint.employer_id == args.employer)
    with session_scope(command.sessions) as s:
        found = [(e.employer_id, representations.endpoint(e)) for e in s.scalars(query)]
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


def _endpoint(command: Command, webhook_id: int) -> None:
    with command.sessions() as s:
        if s.get(WebhookEndpoint, webhook_id) is None:
            raise ValueError(f"no webhook {webhook_id}")


def deliveries(args: argparse.Namespace, command: Command) -> int:
    """An endpoint's deliveries, newest first, as the API shows them."""
    _endpoint(command, args.webhook_id)
    with command.sessions() as s:
        page = delivery_log.list_deliveries(s, args.webhook_id, status=None, limit=EVERY, offset=0)
    data = [representations.delivery(d) for d in page.deliveries]
    lines = [f"{'message':<28} {'event':<22} {'status':<10} {'attempts':>8} {'code':>4}  error"]
    for d in data:
        code = "" if d["lastStatusCode"] is None else str(d["lastStatusCode"])
        lines.append(
            f"{d['id']:<28} {d['event']:<22} {d['status']:<10} {d['attempts']:>8} {code:>4}  "
            f"{d['lastError'] or ''}"
        )
    out(args, {"data": data}, "\n".join(lines))
    return 0


def deliveries_retry(args: argparse.Namespace, command: Command) -> int:
    """Failed deliveries of an endpoint (one message's, or all) back to pending, and
    enqueued; a delivery that has not failed is refused, as by the API (C12)."""
    if (args.message_id is None) == (not args.all_failed):
        raise ValueError("name a MESSAGE_ID or --all-failed")
    _endpoint(command, args.webhook_id)
    with session_scope(command.sessions) as s:
        if args.message_id is not None:
            ids = [delivery_log.retry_delivery(s, args.webhook_id, args.message_id, now=utcnow())]
        else:
            ids = webhook_delivery.retry_failed(s, args.webhook_id, None, now=utcnow())
    queued = enqueue.deliver_webhooks(command.celery, ids)
    out(
        args,
        {"retried": len(ids), "enqueued": queued},
        f"{len(ids)} failed deliveries back to pending; {queued} enqueued"
        + ("" if queued == len(ids) else " (the sweeper enqueues the rest)"),
    )
    return 0
