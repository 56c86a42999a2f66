"""C8 Delivery: the employer's copy, sent to a real SMTP server (the `smtp_sink` fixture)."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import smtplib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.generator import BytesGenerator
from email.message import EmailMessage, Message
from email.policy import EmailPolicy
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import SmtpSink
from tests.harness import SmtpServer, free_port
from tests.workers.mail_reference import build_message
from workers.mail import relay
from workers.mail import report as report_mail
from workers.mail.content import ApplicationCopy, message_id
from workers.mail.mime import Outgoing, render
from workers.mail.relay import PermanentFailure, Relay, SmtpSettings, TransientFailure, send

RESUME = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\n%%EOF\n"
COPY = ApplicationCopy(
    application_id=42,
    job_id=7,
    job_title="Développeuse Python",
    reference_id="REF-2024-01",
    employer_name="Acme Québec",
    to="jobs@acme.example",
    name="Côté, Élodie",
    email="elodie@example.org",
    phone="+1 (514) 555-0199",
    cover_letter="Bonjour,\n<b>I</b> love Python & SQL.\nMerci",
    received_at=datetime(2024, 5, 6, 14, 30, 0, tzinfo=UTC),
    resume_filename="Elodie Cote CV.pdf",
    resume_content_type="application/pdf",
    resume=RESUME,
)
MAIL_FROM = "Jobpost <jobpost@jobs.example>"


@pytest.fixture(autouse=True)
def _no_connection_kept_between_tests() -> Iterator[None]:
    """`send` keeps its connection (workers.mail.relay.RELAY): each test starts and ends without."""
    relay.RELAY.close()
    yield
    relay.RELAY.close()


def parsed(copy: ApplicationCopy = COPY, mail_from: str = MAIL_FROM) -> EmailMessage:
    """The copy as `render` writes it, read back by the email package."""
    message = message_from_bytes(render(copy, mail_from=mail_from).data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def deliver(sink: Any, copy: ApplicationCopy = COPY) -> EmailMessage:
    send(render(copy, mail_from=MAIL_FROM), SmtpSettings(host=sink.host, port=sink.port))
    assert len(sink.messages) == 1
    received: EmailMessage = sink.messages[0]
    return received


def test_copy_reaches_the_job_address_with_the_applicant_as_reply_to(smtp_sink: Any) -> None:
    received = deliver(smtp_sink)
    assert smtp_sink.envelopes == [("jobpost@jobs.example", ["jobs@acme.example"])]
    assert received["To"] == "jobs@acme.example"
    assert received["From"].addresses[0].addr_spec == "jobpost@jobs.example"
    reply_to = received["Reply-To"].addresses[0]
    assert (reply_to.display_name, reply_to.addr_spec) == ("Côté, Élodie", "elodie@example.org")
    assert received["Subject"] == "New application: Développeuse Python [REF-2024-01]"
    assert received["Message-ID"] == "<application-42@jobs.example>"
    assert received["Date"].datetime == COPY.received_at


def test_subject_has_no_brackets_without_reference_id(smtp_sink: Any) -> None:
    received = deliver(smtp_sink, dataclasses.replace(COPY, reference_id=None))
    assert received["Subject"] == "New application: Développeuse Python"


@pytest.mark.parametrize(
    ("language", "shown"),
    [
        ("en", "Received: May 6, 2024, 10:30\u202fa.m. EDT"),
        ("fr", "Date de réception\u00a0: 6 mai 2024, 10 h 30 HAE"),
    ],
)
def test_the_time_received_is_in_the_services_zone_and_the_employers_language(
    language: str, shown: str
) -> None:
    """C13: dates follow the locale (Babel); the time is the service's (TIMEZONE)."""
    copy = dataclasses.replace(COPY, language=language, timezone=ZoneInfo("America/Toronto"))
    text = parsed(copy).get_body(("plain",))
    assert text is not None
    assert shown in text.get_content()


def test_both_parts_list_every_applicant_field(smtp_sink: Any) -> None:
    received = deliver(smtp_sink)
    text = received.get_body(("plain",))
    page = received.get_body(("html",))
    assert text is not None and page is not None
    text_body, html_body = (part.get_content().replace("\r\n", "\n") for part in (text, page))
    values = [
        "Côté, Élodie",
        "elodie@example.org",
        "+1 (514) 555-0199",
        "May 6, 2024, 2:30\u202fp.m. UTC",
    ]
    values += ["Développeuse Python", "REF-2024-01", "Acme Québec"]
    for value in values:
        assert value in text_body
        assert value in html_body
    assert "Job ID: 7\n" in text_body
    assert "<td>7</td>" in html_body
    assert COPY.cover_letter is not None and COPY.cover_letter in text_body
    # C8: applicant input is escaped in HTML; the cover letter keeps its line breaks.
    assert "&lt;b&gt;I&lt;/b&gt; love Python &amp; SQL.<br>" in html_body
    assert "<b>I</b>" not in html_body
    assert "Bonjour,<br>" in html_body


def test_resume_is_attached_unchanged(smtp_sink: Any) -> None:
    received = deliver(smtp_sink)
    [attachment] = list(received.iter_attachments())
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_filename() == "Elodie Cote CV.pdf"
    assert attachment.get_payload(decode=True) == RESUME


def test_a_text_resume_says_it_is_utf8() -> None:
    """Only UTF-8 is taken as TXT (models.applications.resumes); text/plain without a charset would
    be read as US-ASCII, and its accents garbled, by the employer's mail program (C8)."""
    [attachment] = list(parsed(TEXT_RESUME).iter_attachments())
    assert attachment.get_content_type() == "text/plain"
    assert attachment.get_content_charset() == "utf-8"
    assert attachment.get_content() == "Résumé de Zoë\n"


def test_no_attachment_without_resume(smtp_sink: Any) -> None:
    copy = dataclasses.replace(COPY, resume=None, resume_filename=None, resume_content_type=None)
    assert list(deliver(smtp_sink, copy).iter_attachments()) == []


def test_naive_received_at_is_taken_as_utc() -> None:
    naive = dataclasses.replace(COPY, received_at=COPY.received_at.replace(tzinfo=None))
    assert parsed(naive)["Date"].datetime == COPY.received_at
    assert build_message(naive, mail_from=MAIL_FROM)["Date"].datetime == COPY.received_at


def test_a_copy_to_a_french_speaking_employer_is_in_french_in_every_part() -> None:
    """C13: subject, text and HTML parts in the employer's language; the applicant's words
    are left as written and the HTML part still escapes them."""
    message = parsed(dataclasses.replace(COPY, language="fr", phone=None, job_id=None))
    assert message["Subject"] == "Nouvelle candidature\u00a0: Développeuse Python [REF-2024-01]"
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None
    words = text.get_content()
    for line in (
        "Poste\u00a0: Développeuse Python",
        "Numéro de l’offre\u00a0: aucun (offre supprimée)",
        "Téléphone\u00a0: non fourni",
        "CV\u00a0: Elodie Cote CV.pdf",
        "Lettre de présentation\u00a0:",
    ):
        assert line in words
    page = html.get_content()
    assert '<html lang="fr-CA">' in page and "<h1>Nouvelle candidature</h1>" in page
    assert "<th align='left'>Courriel</th>" in page and "&lt;b&gt;I&lt;/b&gt;" in page
    english = parsed(COPY)
    assert english["Subject"] == "New application: Développeuse Python [REF-2024-01]"


def test_message_id_is_the_same_on_every_attempt() -> None:
    # C8: a re-sent copy carries the same Message-ID so mail systems can de-duplicate.
    first, again = parsed(), parsed()
    assert first["Message-ID"] == again["Message-ID"] == message_id(42, "jobs.example")
    assert parsed(mail_from="no domain")["Message-ID"] == "<application-42@localhost>"
    assert build_message(COPY, mail_from=MAIL_FROM)["Message-ID"] == first["Message-ID"]


# --- render writes the message build_message builds ------------------------------------------

ODD = dataclasses.replace(
    COPY,
    application_id=7,
    job_id=None,
    job_title="Chef de partie (cuisine française) — brigade du soir, Montréal-Nord, " * 2,
    reference_id="Q-2024/ÉTÉ",
    employer_name='Les "Trois" Cuisines \\ Inc.',
    to="embauche@cuisine.example",
    name='Zoë "Zed" O\'Brien, Jr.',
    email="zoe.obrien+jobs@example.org",
    phone=None,
    cover_letter="Line one\r\nline two\rline three\n\n.\n..\n\ttabbed   \ntrailing  \n"
    + "long " * 400
    + "\n=== equals === =_ soft\n<script>alert(1)</script>\n"
    + "é" * 300,
    received_at=datetime(2024, 12, 31, 23, 59, 59, 999999),
    resume_filename='Zoë "CV" 2024.odt',
    resume_content_type="application/vnd.oasis.opendocument.text",
    resume=bytes(range(256)) * 40,
)
PLAIN = dataclasses.replace(
    COPY,
    reference_id=None,
    phone=None,
    cover_letter=None,
    resume=None,
    resume_filename=None,
    resume_content_type=None,
)
INTERNATIONAL = dataclasses.replace(PLAIN, to="recrutement@société.example", name="Łukasz Żółw")
TEXT_RESUME = dataclasses.replace(
    COPY,
    resume="Résumé de Zoë\n".encode(),
    resume_filename="cv.txt",
    resume_content_type="text/plain",
)
COPIES = {
    "full": COPY,
    "odd": ODD,
    "plain": PLAIN,
    "international": INTERNATIONAL,
    "text résumé": TEXT_RESUME,
    "french": dataclasses.replace(COPY, language="fr"),  # no-break spaces in the subject (C13)
}
SENDERS = [MAIL_FROM, "Jobpost Québec <emplois@jobs.example>", "jobpost@localhost"]


def sent_as_send_message_sends(message: EmailMessage) -> bytes:
    """What smtplib's send_message flattens `message` to (the copy as sent before render)."""
    out = io.BytesIO()
    international = not str(message["To"]).isascii()
    generator = BytesGenerator(
        out, policy=cast(EmailPolicy, message.policy).clone(utf8=True) if international else None
    )
    generator.flatten(message, linesep="\r\n")
    return out.getvalue()


def shape(raw: bytes) -> list[Any]:
    """A message as the email package reads it: the top-level headers, then each part's
    type, parameters, disposition and decoded content. Boundaries, which are random, and
    MIME-Version inside parts (which EmailMessage adds and means nothing there) are left out."""
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    top = [(name, str(value)) for name, value in message.items() if name != "Content-Type"]
    parts: list[Any] = [top]
    for part in message.walk():
        assert isinstance(part, Message)
        params = [(k, v) for k, v in part.get_params() or [] if k != "boundary"]
        disposition = part.get_content_disposition(), part.get_filename()
        content = None if part.is_multipart() else part.get_payload(decode=True)
        parts.append((part.get_content_type(), params, disposition, content))
    return parts


@pytest.mark.parametrize("mail_from", SENDERS)
@pytest.mark.parametrize("name", list(COPIES))
def test_render_writes_the_message_build_message_builds(name: str, mail_from: str) -> None:
    copy = COPIES[name]
    rendered = render(copy, mail_from=mail_from)
    built = build_message(copy, mail_from=mail_from)
    assert shape(rendered.data) == shape(sent_as_send_message_sends(built))
    assert rendered.recipients == (copy.to,)
    assert rendered.sender == parsed(copy, mail_from)["From"].addresses[0].addr_spec
    assert rendered.smtputf8 is (name == "international")


@pytest.mark.parametrize("name", list(COPIES))
def test_rendered_lines_end_in_crlf_and_fit(name: str) -> None:
    data = render(COPIES[name], mail_from=MAIL_FROM).data
    assert data.endswith(b"\r\n")
    lines = data.split(b"\r\n")
    assert not any(b"\r" in line or b"\n" in line for line in lines)
    assert max(len(line) for line in lines) <= 78


def test_a_line_of_the_cover_letter_starting_with_from_is_sent_as_written() -> None:
    """send_message wrote such a line as ">From …" (its generator mangles it for mbox files);
    quoted-printable needs no such thing, and the employer reads what the applicant wrote."""
    copy = dataclasses.replace(COPY, cover_letter="Hello,\nFrom Montréal with love.\n")
    text = parsed(copy).get_body(("plain",))
    assert text is not None
    assert "\nFrom Montréal with love.\n" in text.get_content().replace("\r\n", "\n")


def test_each_copy_has_boundaries_of_its_own() -> None:
    first, again = (render(COPY, mail_from=MAIL_FROM).data for _ in range(2))
    assert set(re.findall(rb'boundary="([^"]+)"', first)).isdisjoint(
        re.findall(rb'boundary="([^"]+)"', again)
    )


def test_a_header_value_of_several_lines_is_refused() -> None:
    with pytest.raises(ValueError):
        render(dataclasses.replace(COPY, to="a@b.example\nBcc: c@d.example"), mail_from=MAIL_FROM)


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


# --- what applicants and employers write cannot add headers (C8) --------------------------------

HOSTILE = dataclasses.replace(
    PLAIN,
    name="=?utf-8?q?A=0D=0ASubject:_URGENT_wire_fee=0D=0AContent-Type:_text/html?=",
    job_title="Cook =?utf-8?q?x=0D=0ABcc:_evil@example.com?=",
    reference_id="=?utf-8?q?=0D=0AX-Evil:_1?=",
)
TOP_HEADERS = ["To", "From", "Reply-To", "Subject", "Message-ID", "Date", "MIME-Version"]


def test_an_encoded_word_in_a_name_or_title_adds_no_header() -> None:
    """The email package decodes RFC 2047 encoded words in the values it is given; before
    Python 3.11.10 it wrote a decoded line break out raw (gh-121650), so an applicant's name
    could write a Subject or Bcc of its own. The copy says what was written, as written."""
    data = render(HOSTILE, mail_from=MAIL_FROM).data
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    names = [line.split(":", 1)[0] for line in head.split("\r\n") if not line[0].isspace()]
    assert names == [*TOP_HEADERS, "Content-Type"]
    message = parsed(HOSTILE)
    assert message["Subject"] == f"New application: {HOSTILE.job_title} [{HOSTILE.reference_id}]"
    [reply_to] = message["Reply-To"].addresses
    assert reply_to.addr_spec == HOSTILE.email
    assert reply_to.display_name.replace(" ", "") == HOSTILE.name  # words rejoined as read


def test_an_applicant_address_outside_ascii_is_written_as_utf8() -> None:
    """RFC 2047 words inside an address make no address: the Reply-To is written as UTF-8
    (RFC 6532), as a recipient outside ASCII already was."""
    copy = dataclasses.replace(PLAIN, name="José", email="josé@exämple.org")
    rendered = render(copy, mail_from=MAIL_FROM)
    assert rendered.smtputf8
    assert "\r\nReply-To: José <josé@exämple.org>\r\n" in rendered.data.decode()


def test_an_address_that_decodes_to_a_line_break_cannot_be_rendered() -> None:
    """Refused on intake since (models.core.checks.email); one stored earlier makes no copy, and
    workers.delivery fails it instead of retrying."""
    with pytest.raises(ValueError):
        render(
            dataclasses.replace(PLAIN, to="=?utf-8?q?=0D=0Ax?=@example.com"), mail_from=MAIL_FROM
        )


@pytest.mark.parametrize(
    "filename", ["=?utf-8?q?=0D=0AX-Evil:_1?=.pdf", "a =?utf-8?q?x=0D=0A?= b.pdf"]
)
def test_a_resume_filename_holding_encoded_words_is_attached_under_that_name(filename: str) -> None:
    copy = dataclasses.replace(COPY, resume_filename=filename)
    [attachment] = list(parsed(copy).iter_attachments())
    assert attachment.get_filename() == filename
    assert list(attachment.keys()) == [
        "Content-Type",
        "Content-Transfer-Encoding",
        "Content-Disposition",
    ]
    assert attachment.get_payload(decode=True) == RESUME


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


def test_a_report_title_with_line_breaks_and_encoded_words_is_sent_as_written(
    smtp_sink: SmtpSink,
) -> None:
    """C13: the report email's Subject is guarded as the copy's, whatever the Python patch
    level (gh-121650): a stored title's raw line breaks and encoded words add no header, no
    recipient and no HTML; the relay receives the title as text."""
    title = "Cook\r\nX-Evil: 1 =?utf-8?q?x=0D=0ABcc:_evil@example.com=0D=0A=0D=0A<b>hi</b>?="
    report = SimpleNamespace(
        id=3,
        reason="scam",
        job_id=7,
        job_title=title,
        employer_name="Acme",
        job_reference_id=None,
        email="zoé@exemple.ca",
        created_at=datetime(2024, 5, 6, 14, 30, tzinfo=UTC),
        details="Asks for a fee.",
    )
    rendered = report_mail.render(
        report, to="trust@jobs.example", mail_from=MAIL_FROM, base_url=None
    )
    send(rendered, SmtpSettings(host=smtp_sink.host, port=smtp_sink.port))
    [message] = smtp_sink.messages
    assert smtp_sink.envelopes == [("jobpost@jobs.example", ["trust@jobs.example"])]
    assert sorted(message.keys()) == sorted(
        [*TOP_HEADERS, "Content-Type", "Content-Transfer-Encoding"]
    )
    flat = " ".join(title.split())
    assert message["Subject"] == f"Fraud report #3 (scam): {flat}"
    assert message["Reply-To"] == "zoé@exemple.ca"
    assert not message.is_multipart() and message.get_content_type() == "text/plain"
    assert f"Title:     {flat}\n" in message.get_content().replace("\r\n", "\n")
