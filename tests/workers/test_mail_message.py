"""C8 Delivery: the employer's copy as a real SMTP server (the `smtp_sink` fixture) receives it,
what it says in each language, `render` writing the message `build_message` builds, and what
applicants and employers write adding no header (the report mail's title too)."""

from __future__ import annotations

import dataclasses
import io
import re
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.generator import BytesGenerator
from email.message import EmailMessage, Message
from email.policy import EmailPolicy
from types import SimpleNamespace
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import SmtpSink
from tests.workers.mail_copies import COPY, MAIL_FROM, PLAIN, RESUME, deliver, parsed
from tests.workers.mail_copies import (
    _no_connection_kept_between_tests as _no_connection_kept_between_tests,
)
from tests.workers.mail_reference import build_message
from workers.mail import report as report_mail
from workers.mail.content import message_id
from workers.mail.mime import render
from workers.mail.relay import SmtpSettings, send


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
