"""`jobpost bounces` (C22): the SMTP server of BOUNCE_DOMAIN, where delivery status
notifications of the employers' copies arrive.

It takes mail for that domain only, and answers 250 to whatever it takes, DSN or not, so a
relay has nothing to send back (and a spammer nothing to learn); what is not a DSN for a known
copy is dropped and counted. What it records is committed before the 250: if the database
cannot take it, the answer is 451 and the relay tries again later, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiosmtpd.controller import Controller
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from models.applications import bounces
from models.core.dates import utcnow
from models.db.unit_of_work import after_commit, session_scope
from models.webhooks import messages as webhook_messages

log = logging.getLogger("jobpost.bounces")

MAX_MESSAGE = 10 * 1024 * 1024  # a DSN returning a copy with its résumé (RET=FULL) fits


class Receiver:
    """The aiosmtpd handler: RCPT for BOUNCE_DOMAIN only, DATA recorded at once."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        domain: str,
        key: bytes,
        enqueue: Callable[[list[int]], object],
    ) -> None:
        self.sessions, self.domain, self.key, self.enqueue = sessions, domain, key, enqueue

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if not address.lower().endswith("@" + self.domain):
            return "550 5.7.1 this server takes mail for its bounce domain only"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        data = envelope.original_content or envelope.content
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.take, list(envelope.rcpt_tos), raw)
        except SQLAlchemyError as e:
            log.warning("bounces: not recorded (%s); the relay is asked to try again", e)
            return "451 4.3.0 could not record the message; try again later"
        return "250 OK"

    def take(self, recipients: list[str], data: bytes) -> list[str]:
        """Record what `data` says of the copy each recipient names, in one transaction;
        returns each report's outcome (`undeliverable`, `recorded`, or the drop's reason)."""
        now = utcnow()
        outcomes: list[str] = []
        events: list[str] = []
        with session_scope(self.sessions) as s:
            for recipient in recipients:
                outcomes.extend(self._take_one(s, recipient, data, now, events))
            deliveries = webhook_messages.pending_of(s, events, now=now) if events else []
            if deliveries:
                after_commit(s, lambda: self.enqueue(deliveries))
        log.info("bounces: %s", ", ".join(outcomes))
        return outcomes

    def _take_one(
        self, s: Session, recipient: str, data: bytes, now: datetime, events: list[str]
    ) -> list[str]:
        try:
            application_id = bounces.copy_named(recipient, domain=self.domain, key=self.key)
            found = bounces.notices(data)
        except bounces.Dropped as e:
            bounces.drop(s, e.reason, now=now)
            return [e.reason]
        outcomes = []
        for notice in found:
            try:
                taken = bounces.take(s, application_id, notice, now=now)
            except bounces.Dropped as e:
                bounces.drop(s, e.reason, now=now)
                outcomes.append(e.reason)
                continue
            events.extend(taken.events)
            outcomes.append("undeliverable" if taken.undeliverable else "recorded")
        return outcomes


def serve(receiver: Receiver, host: str, port: int) -> int:
    """Run the server until SIGTERM or SIGINT."""
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    controller = Controller(
        receiver, hostname=host, port=port, data_size_limit=MAX_MESSAGE, ident="jobpost bounces"
    )
    controller.start()
    log.info("bounces: listening on %s:%s for @%s", host, port, receiver.domain)
    stopped = asyncio.Event()
    loop = asyncio.new_event_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    try:
        loop.run_until_complete(stopped.wait())
    finally:
        controller.stop()
        loop.close()
    return 0
