"""C8 Delivery through the SMTP relay (workers.mail.relay): which failures are transient and
which permanent, STARTTLS and login, one kept connection for consecutive sends, and C12's
deadline of a send and a connection per thread and per process."""

from __future__ import annotations

import dataclasses
import os
import re
import smtplib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SmtpSink
from tests.harness import SmtpServer, free_port
from tests.workers.mail_copies import COPY, MAIL_FROM, PLAIN
from tests.workers.mail_copies import (
    _no_connection_kept_between_tests as _no_connection_kept_between_tests,
)
from workers.mail import relay
from workers.mail.content import message_id
from workers.mail.mime import Outgoing, render
from workers.mail.relay import PermanentFailure, Relay, SmtpSettings, TransientFailure, send


def test_connection_refused_is_transient(unused_port: int) -> None:
    message = render(COPY, mail_from=MAIL_FROM)
    with pytest.raises(TransientFailure, match="ConnectionRefusedError"):
        send(message, SmtpSettings(host="127.0.0.1", port=unused_port, timeout=2))


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections but never greets."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_timeout_is_transient(silent_server: int) -> None:
    message = render(COPY, mail_from=MAIL_FROM)
    with pytest.raises(TransientFailure, match="timed out"):
        send(message, SmtpSettings(host="127.0.0.1", port=silent_server, timeout=0.2))


def test_5xx_is_permanent_with_the_server_reply(smtp_sink: Any) -> None:
    smtp_sink.reply = "550 5.1.1 mailbox unavailable"
    with pytest.raises(PermanentFailure) as caught:
        deliver_without_check(smtp_sink)
    assert str(caught.value) == "550 5.1.1 mailbox unavailable"
    assert smtp_sink.messages == []


def test_4xx_is_transient(smtp_sink: Any) -> None:
    smtp_sink.reply = "451 4.3.0 try later"
    with pytest.raises(TransientFailure, match=r"451 4\.3\.0 try later"):
        deliver_without_check(smtp_sink)


@pytest.mark.parametrize(
    ("reply", "failure"), [("452 4.3.1 full", TransientFailure), ("554 5.6.0 no", PermanentFailure)]
)
def test_data_replies_are_mapped(smtp_sink: Any, reply: str, failure: type[Exception]) -> None:
    smtp_sink.data_reply = reply
    with pytest.raises(failure, match=re.escape(reply)):
        deliver_without_check(smtp_sink)


def deliver_without_check(sink: Any) -> None:
    send(render(COPY, mail_from=MAIL_FROM), SmtpSettings(host=sink.host, port=sink.port))


class FakeSMTP:
    """Records the conversation smtplib would have, for the STARTTLS and login paths: stands
    in for relay.Connection (smtplib.SMTP on timed sockets)."""

    calls: list[str]

    def __init__(self, timeout: float, clock: relay.Clock) -> None:
        self.timeout, self.clock = timeout, clock

    def connect(self, host: str, port: int) -> None:
        FakeSMTP.calls.append(f"connect {host}:{port} {self.timeout}")

    def rset(self) -> tuple[int, bytes]:
        FakeSMTP.calls.append("rset")
        return 250, b"OK"

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: FakeSMTP.calls.append(name)


@pytest.fixture(autouse=True)
def _fresh_conversation() -> None:
    FakeSMTP.calls = []


def test_starttls_then_ehlo_then_login_once_per_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay, "Connection", FakeSMTP)
    settings = SmtpSettings(host="relay", port=587, user="u", password="p", starttls=True)
    send(render(COPY, mail_from=MAIL_FROM), settings)
    send(render(COPY, mail_from=MAIL_FROM), settings)
    relay.RELAY.close()
    first = ["starttls", "ehlo", "login", "sendmail"]
    again = ["sendmail"]  # the kept connection: already secured and logged in
    assert FakeSMTP.calls == ["connect relay:587 30.0", *first, *again, "quit", "close"]


def test_connection_is_closed_after_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing(FakeSMTP):
        def sendmail(self, *args: Any) -> None:
            raise smtplib.SMTPSenderRefused(553, b"5.7.1 sender rejected", "jobpost@jobs.example")

    monkeypatch.setattr(relay, "Connection", Refusing)
    with pytest.raises(PermanentFailure, match=r"553 5\.7\.1 sender rejected"):
        send(render(COPY, mail_from=MAIL_FROM), SmtpSettings())
    assert FakeSMTP.calls[-2:] == ["quit", "close"]
    with pytest.raises(PermanentFailure):  # not kept: the next send opens a new connection
        send(render(COPY, mail_from=MAIL_FROM), SmtpSettings())
    assert FakeSMTP.calls.count("connect 127.0.0.1:1025 30.0") == 2


def test_after_a_timeout_the_connection_is_dropped_without_waiting_for_quit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that stopped answering will not answer QUIT either: waiting for it would hold
    the task another SMTP_TIMEOUT (and, past the soft time limit, into the hard one)."""

    class Stalling(FakeSMTP):
        def sendmail(self, *args: Any) -> None:
            raise TimeoutError("timed out")

    monkeypatch.setattr(relay, "Connection", Stalling)
    with pytest.raises(TransientFailure, match="timed out"):
        send(render(COPY, mail_from=MAIL_FROM), SmtpSettings())
    assert FakeSMTP.calls[-1] == "close" and "quit" not in FakeSMTP.calls
    relay.RELAY.close()
    assert FakeSMTP.calls[-1] == "close" and "quit" not in FakeSMTP.calls  # nothing was kept


# --- one connection for consecutive sends (workers.mail.relay.Relay) ------------------------------


class Conversations(SmtpSink):
    """The conftest sink, also noting the commands that open, reset and end a session."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host=host, port=port)
        self.commands: list[str] = []

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        self.commands.append("EHLO")
        session.host_name = hostname  # what aiosmtpd does itself when there is no hook
        return responses

    async def handle_RSET(self, server: Any, session: Any, envelope: Any) -> str:
        self.commands.append("RSET")
        return "250 OK"

    async def handle_QUIT(self, server: Any, session: Any, envelope: Any) -> str:
        self.commands.append("QUIT")
        return "221 Bye"


@pytest.fixture
def conversations() -> Iterator[Conversations]:
    with SmtpServer(Conversations("127.0.0.1", free_port())) as sink:
        yield sink


def relay_settings(sink: SmtpSink) -> SmtpSettings:
    return SmtpSettings(host=sink.host, port=sink.port, timeout=5)


def copy_number(i: int) -> Outgoing:
    return render(dataclasses.replace(COPY, application_id=i), mail_from=MAIL_FROM)


def test_consecutive_sends_share_one_connection_with_no_reset_between(
    conversations: Conversations,
) -> None:
    """A message that went through ended its SMTP transaction: the next starts with MAIL."""
    relay = Relay()
    for i in range(3):
        relay.send(copy_number(i), relay_settings(conversations))
    relay.close()
    assert [str(m["Message-ID"]) for m in conversations.messages] == [
        message_id(i, "jobs.example") for i in range(3)
    ]
    assert conversations.commands == ["EHLO", "QUIT"]


def test_a_connection_the_relay_dropped_is_replaced_and_the_copy_sent_once() -> None:
    """The relay closes clients idle for 0.3 s (aiosmtpd's session timeout): the MAIL on the
    kept connection finds it gone, and the copy goes out on a new one."""
    with SmtpServer(Conversations("127.0.0.1", free_port()), timeout=0.3) as sink:
        relay = Relay()
        relay.send(copy_number(1), relay_settings(sink))
        time.sleep(0.8)
        relay.send(copy_number(2), relay_settings(sink))
        relay.close()
    ids = [message_id(i, "jobs.example") for i in (1, 2)]
    assert [str(m["Message-ID"]) for m in sink.messages] == ids
    assert sink.commands == ["EHLO", "EHLO", "QUIT"]


class ClosingAtMail(Conversations):
    """Answers the MAIL of its `closing`th conversation 421, as a relay ending a session."""

    closing = 0

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.closing -= 1
        if self.closing == 0:
            return "421 4.3.2 closing"
        envelope.mail_from, envelope.mail_options = address, options
        return "250 OK"


def test_a_relay_ending_a_kept_connection_at_mail_gets_the_copy_on_a_new_one() -> None:
    with SmtpServer(ClosingAtMail("127.0.0.1", free_port())) as sink:
        relay = Relay()
        relay.send(copy_number(1), relay_settings(sink))
        sink.closing = 1
        relay.send(copy_number(2), relay_settings(sink))
        relay.close()
    ids = [message_id(i, "jobs.example") for i in (1, 2)]
    assert [str(m["Message-ID"]) for m in sink.messages] == ids
    assert sink.commands == ["EHLO", "EHLO", "QUIT"]


class DroppingAtRcpt(Conversations):
    """Drops the connection at the RCPT of its `dropping`th message, once its MAIL is in."""

    dropping = 0

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        self.dropping -= 1
        if self.dropping == 0:
            server.transport.close()
        return await super().handle_RCPT(server, session, envelope, address, options)


def test_a_kept_connection_lost_after_the_relay_took_its_mail_is_not_tried_again() -> None:
    """Past an accepted MAIL the copy is the retry schedule's (C8), not a new connection's:
    only a connection the relay ended before taking anything is replaced at once."""
    with SmtpServer(DroppingAtRcpt("127.0.0.1", free_port())) as sink:
        relay = Relay()
        relay.send(copy_number(1), relay_settings(sink))
        sink.dropping = 1
        with pytest.raises(TransientFailure, match="closed"):
            relay.send(copy_number(2), relay_settings(sink))
        relay.close()
    assert [str(m["Message-ID"]) for m in sink.messages] == [message_id(1, "jobs.example")]
    assert sink.commands == ["EHLO"]


def test_an_idle_connection_is_closed_with_quit(conversations: Conversations) -> None:
    relay = Relay(idle_seconds=0.2)
    relay.send(copy_number(1), relay_settings(conversations))
    deadline = time.monotonic() + 5
    while "QUIT" not in conversations.commands and time.monotonic() < deadline:
        time.sleep(0.02)
    assert conversations.commands == ["EHLO", "QUIT"]
    relay.send(copy_number(2), relay_settings(conversations))  # and a new one opens
    relay.close()
    assert conversations.commands == ["EHLO", "QUIT", "EHLO", "QUIT"]
    assert len(conversations.messages) == 2


def test_other_settings_get_a_connection_of_their_own(
    conversations: Conversations, smtp_sink: SmtpSink
) -> None:
    relay = Relay()
    relay.send(copy_number(1), relay_settings(conversations))
    relay.send(copy_number(2), relay_settings(smtp_sink))
    relay.close()
    assert conversations.commands == ["EHLO", "QUIT"]
    assert [len(conversations.messages), len(smtp_sink.messages)] == [1, 1]


def test_a_copy_needing_smtputf8_fails_for_good_at_a_relay_without_it() -> None:
    """An applicant's address outside ASCII is written as UTF-8 (RFC 6532), which only a relay
    offering SMTPUTF8 takes; one that does not will not on the next attempt either, so the
    copy fails at once (C8: permanent), saying why, and nothing is sent."""
    with SmtpServer(SmtpSink("127.0.0.1", free_port()), enable_SMTPUTF8=False) as sink:
        international = dataclasses.replace(PLAIN, email="josé@exämple.org")
        try:
            with pytest.raises(PermanentFailure, match="SMTPUTF8"):
                send(render(international, mail_from=MAIL_FROM), relay_settings(sink))
            send(render(PLAIN, mail_from=MAIL_FROM), relay_settings(sink))  # ASCII goes through
        finally:
            relay.RELAY.close()
    [message] = sink.messages
    assert f"<{PLAIN.email}>" in str(message["Reply-To"])


# --- the deadline of a send, and a connection per thread (C12's delivery engine) ------------------


class Trickle:
    """A relay that greets, then answers every command one byte each `every` seconds, for at
    most `for_seconds` (so a test without the deadline fails instead of hanging)."""

    def __init__(self, every: float = 0.05, for_seconds: float = 6.0) -> None:
        self.every, self.for_seconds = every, for_seconds
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.sendall(b"220 trickle ready\r\n")
            conn.recv(1024)  # EHLO
            reply = b"250-trickle\r\n" * 1000 + b"250 OK\r\n"
            end = time.monotonic() + self.for_seconds
            for byte in reply:
                if time.monotonic() > end:
                    break
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(self.every)

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=10)


def test_a_relay_that_trickles_bytes_cannot_hold_a_send_past_its_deadline() -> None:
    """Each byte comes well within SMTP_TIMEOUT, so only the deadline ends the send."""
    trickle = Trickle()
    try:
        started = time.monotonic()
        with pytest.raises(TransientFailure, match="deadline"):
            send(
                copy_number(1),
                SmtpSettings(host="127.0.0.1", port=trickle.port, timeout=5),
                deadline=started + 1.0,
            )
        took = time.monotonic() - started
    finally:
        trickle.close()
    assert 0.9 < took < 2.0


def test_a_deadline_already_passed_sends_nothing(conversations: Conversations) -> None:
    with pytest.raises(TransientFailure, match="deadline"):
        send(copy_number(1), relay_settings(conversations), deadline=time.monotonic() - 1)
    assert conversations.messages == [] and conversations.commands == []


def test_a_send_within_its_deadline_keeps_its_connection_without_one(
    conversations: Conversations,
) -> None:
    """The deadline is the send's: the kept connection's next MAIL and idle QUIT come later."""
    send(copy_number(1), relay_settings(conversations), deadline=time.monotonic() + 0.5)
    time.sleep(0.6)
    send(copy_number(2), relay_settings(conversations), deadline=time.monotonic() + 5)
    relay.RELAY.close()
    assert conversations.commands == ["EHLO", "QUIT"]
    assert len(conversations.messages) == 2


def test_each_thread_sends_over_a_connection_of_its_own_all_quit_at_close(
    conversations: Conversations,
) -> None:
    barrier = threading.Barrier(4)

    def two_sends(n: int) -> None:
        barrier.wait()
        for i in range(2):
            send(copy_number(10 * n + i), relay_settings(conversations))

    threads = [threading.Thread(target=two_sends, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(conversations.messages) == 8
    assert conversations.commands.count("EHLO") == 4  # one connection per thread
    assert "RSET" not in conversations.commands  # each reused at once
    relay.RELAY.close()
    assert conversations.commands.count("QUIT") == 4


def test_a_forked_child_sends_over_its_own_connection(conversations: Conversations) -> None:
    """What prefork does: the child neither uses nor QUITs the parent's connection."""
    send(copy_number(1), relay_settings(conversations))
    pid = os.fork()
    if pid == 0:  # the child: one send over a new connection, then QUIT it
        code = 1
        try:
            send(copy_number(2), relay_settings(conversations))
            relay.RELAY.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert conversations.commands == ["EHLO", "EHLO", "QUIT"]  # the child's, opened and ended
    send(copy_number(3), relay_settings(conversations))  # the parent's is still open
    relay.RELAY.close()
    assert conversations.commands == ["EHLO", "EHLO", "QUIT", "QUIT"]
    assert len(conversations.messages) == 3


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key, made by openssl."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_after_starttls_the_deadline_still_holds(tls_files: tuple[Path, Path]) -> None:
    """The connection's sockets are timed after STARTTLS too (relay.Connection.starttls)."""
    cert, key = tls_files
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))
    sink = Conversations("127.0.0.1", free_port())
    with SmtpServer(sink, tls_context=server_context):
        clock = relay.Clock()
        clock.deadline = time.monotonic() + 10
        conn = relay.Connection(5, clock)
        try:
            conn.connect("localhost", sink.port)  # the name the certificate is checked against
            conn.starttls(context=client_context)
            conn.ehlo()
            message = copy_number(1)
            conn.sendmail(message.sender, list(message.recipients), message.data)
            assert isinstance(conn.sock, relay._TimedSSLSocket) and conn.sock.clock is clock
            clock.deadline = time.monotonic() - 1
            with pytest.raises(smtplib.SMTPServerDisconnected) as caught:
                conn.noop()  # smtplib reports the socket's refusal as a lost connection
            assert isinstance(caught.value.__context__, relay.DeadlinePassed)
        finally:
            conn.close()
    assert [str(m["Message-ID"]) for m in sink.messages] == [message_id(1, "jobs.example")]
