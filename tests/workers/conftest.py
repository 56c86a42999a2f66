"""A real SMTP server (aiosmtpd) for the delivery tests of C8, reusable as `smtp_sink`."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class SmtpSink:
    """Stores what it accepts; `reply` (RCPT) or `data_reply` (DATA) make it refuse instead."""

    host: str
    port: int
    reply: str | None = None
    data_reply: str | None = None
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if self.reply is not None:
            return self.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.data_reply is not None:
            return self.data_reply
        parsed = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


@pytest.fixture
def unused_port() -> int:
    """A port with no server behind it: connecting is refused."""
    return free_port()


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    """A running SMTP server on 127.0.0.1 and a free port, stopped after the test."""
    sink = SmtpSink(host="127.0.0.1", port=free_port())
    controller = Controller(
        sink, hostname=sink.host, port=sink.port, server_hostname="localhost", ready_timeout=5.0
    )
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()
