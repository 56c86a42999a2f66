"""The employer's copy of an application (C8 Delivery), built and sent by SMTP (C9).

`render` writes a copy as the bytes that are sent, in one pass: the headers that carry
applicant or job data are folded by the email package's own header classes (encoded words,
quoting, folding: the same header lines `EmailMessage` writes), the bodies are encoded by
`binascii` (quoted-printable, base64), and the MIME skeleton around them is written out.
`build_message` builds the same copy part by part with `EmailMessage`: plain to read, but
far more work (every header is parsed as it is set, and smtplib's send_message flattens the
tree again; docs/benchmarks.md). The tests hold `render` to it: same headers, same MIME structure,
same decoded content (a value holding an RFC 2047 encoded word aside: `render` writes it as
given, where `build_message` lets the email package decode it). The bytes differ where the
email package is loose: it breaks quoted-printable lines at 78 characters (RFC 2045 says 76),
and send_message writes a line of the cover letter that starts with "From " as ">From " (a
precaution for mbox files).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import html
import os
import random
import re
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy as policies
from email.header import Header
from email.headerregistry import Address, BaseHeader, HeaderRegistry
from email.message import EmailMessage
from email.utils import encode_rfc2231, format_datetime, getaddresses, parseaddr, quote
from functools import lru_cache
from typing import Any

from models import resumes
from models.checks import ENCODED_WORD


@dataclass(frozen=True)
class ApplicationCopy:
    """A snapshot of one application and its job: all a delivery needs (C8)."""

    application_id: int
    job_id: int | None
    job_title: str
    reference_id: str | None
    employer_name: str
    to: str
    name: str
    email: str
    phone: str | None
    cover_letter: str | None
    received_at: datetime
    resume_filename: str | None
    resume_content_type: str | None
    resume: bytes | None


@dataclass(frozen=True)
class SmtpSettings:
    """The outgoing relay (C9 `SMTP_*` and `MAIL_FROM`)."""

    host: str = "127.0.0.1"
    port: int = 1025
    user: str | None = None
    password: str | None = None
    starttls: bool = False
    timeout: float = 30.0
    mail_from: str = "jobpost@localhost"


@dataclass(frozen=True)
class Outgoing:
    """A rendered copy: its SMTP envelope and its bytes (CRLF line ends), ready to send."""

    sender: str
    recipients: tuple[str, ...]
    data: bytes
    smtputf8: bool  # an envelope address is not ASCII: the relay must offer SMTPUTF8


class TransientFailure(Exception):
    """Connection refused, timeout or 4xx reply: retry later (C8)."""


class PermanentFailure(Exception):
    """A 5xx reply: never retry (C8)."""


def message_id(application_id: int, domain: str) -> str:
    """The Message-ID of an application's copy, the same on every attempt (C8)."""
    return f"<application-{application_id}@{domain}>"


def build_message(copy: ApplicationCopy, *, mail_from: str) -> EmailMessage:
    """The copy: To the job's address, Reply-To the applicant, text + HTML, résumé (C8)."""
    msg = EmailMessage()
    msg["To"] = copy.to
    msg["From"] = mail_from
    msg["Reply-To"] = _applicant_address(copy)
    msg["Subject"] = _subject(copy)
    msg["Message-ID"] = message_id(copy.application_id, _domain(mail_from))
    msg["Date"] = format_datetime(_utc(copy.received_at))
    rows = _rows(copy)
    msg.set_content(_text_body(rows, copy.cover_letter), cte="quoted-printable")
    msg.add_alternative(_html_body(rows, copy.cover_letter), subtype="html", cte="quoted-printable")
    if copy.resume is not None:
        _attach(msg, copy.resume, copy.resume_content_type, copy.resume_filename)
    return msg


class _Headers(HeaderRegistry):
    """The standard header classes. HeaderRegistry creates a new class for every header it
    is asked for (`type(...)` on each lookup); they are the same each time, so keep them."""

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, type[BaseHeader]] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        key = name.lower()
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = super().__getitem__(name)
        return cls


# What smtplib's send_message flattens with: policy.default with CRLF line ends, or with
# UTF-8 headers when an envelope address needs SMTPUTF8.
_SMTP = policies.SMTP.clone(header_factory=_Headers())
_SMTPUTF8 = _SMTP.clone(utf8=True)
_TEXT_HEADERS = b'charset="utf-8"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n'


def render(copy: ApplicationCopy, *, mail_from: str) -> Outgoing:
    """The copy as sent (C8): the message `build_message` builds, with its envelope as
    smtplib's send_message would take it from the headers."""
    sender, from_line = _from(mail_from)
    to = _header("To", copy.to)
    recipients = tuple(address for _, address in getaddresses([str(to)]))
    reply_to = _applicant_address(copy)
    # An address outside ASCII, the applicant's too, is written as UTF-8 (RFC 6532): as an
    # encoded word it would be no address at all (RFC 2047 section 5).
    smtputf8 = not "".join([sender, *recipients, reply_to.addr_spec]).isascii()
    fold = _SMTPUTF8 if smtputf8 else _SMTP
    head = [
        _one_header(to.fold(policy=fold)),
        from_line[smtputf8],
        _one_header(_reply_to(reply_to, fold)),
        _one_header(_subject_line(_subject(copy), fold)),
        f"Message-ID: {message_id(copy.application_id, _domain(mail_from))}\r\n",
        f"Date: {format_datetime(_utc(copy.received_at))}\r\n",
        "MIME-Version: 1.0\r\n",
    ]
    rows = _rows(copy)
    inner = _boundary()
    parts = [
        b"Content-Type: text/plain; " + _TEXT_HEADERS + _qp(_text_body(rows, copy.cover_letter)),
        b"Content-Type: text/html; " + _TEXT_HEADERS + _qp(_html_body(rows, copy.cover_letter)),
    ]
    body = _multipart("alternative", inner, parts)
    if copy.resume is not None:
        attachment = _attachment(copy.resume, copy.resume_content_type, copy.resume_filename, fold)
        body = _multipart("mixed", _boundary(), [body, attachment])
    data = "".join(head).encode("utf-8" if smtputf8 else "ascii") + body
    return Outgoing(sender, recipients, data, smtputf8)


# A line break, or any other control character but tab, inside a folded header line.
_BREAK = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _one_header(line: str) -> str:
    """`line` if it is one header (its breaks are folds); else ValueError: the copy cannot be
    written safely, which no retry mends (workers.delivery fails it)."""
    inside = line[:-2].replace("\r\n ", " ").replace("\r\n\t", " ")
    if not line.endswith("\r\n") or _BREAK.search(inside):
        raise ValueError(f"a header would not be one line: {line[:80]!r}")
    return line


def _literal(text: str) -> str:
    """`text` as encoded words that decode to exactly it, "=?" and all."""
    return Header(text, "utf-8").encode(linesep="\r\n")


def _subject_line(subject: str, fold: policies.EmailPolicy[Any]) -> str:
    """The email package decodes the RFC 2047 encoded words (ENCODED_WORD) it finds in a value
    it is given, and before Python 3.11.10 (gh-121650) wrote a decoded line break out raw: a
    title holding "=?utf-8?q?=0D=0ABcc:...?=" would add headers to the copy. Such a value is
    written as encoded words of its own, which decode to exactly what was given."""
    if ENCODED_WORD in subject:
        return f"Subject: {_literal(subject)}\r\n"
    return _header("Subject", subject).fold(policy=fold)


def _reply_to(address: Address, fold: policies.EmailPolicy[Any]) -> str:
    """The applicant's name, as `_subject_line` writes a title."""
    if ENCODED_WORD in address.display_name:
        return f"Reply-To: {_literal(address.display_name)} <{address.addr_spec}>\r\n"
    return _header("Reply-To", address).fold(policy=fold)


def _header(name: str, value: object) -> BaseHeader:
    """Parsed as `msg[name] = value` parses it (refusing a value of several lines)."""
    _, header = _SMTP.header_store_parse(name, value)
    return header  # type: ignore[no-any-return]


@lru_cache(maxsize=8)
def _from(mail_from: str) -> tuple[str, tuple[str, str]]:
    """MAIL_FROM's envelope address (as send_message finds it) and its folded header line,
    as ASCII and with UTF-8 headers: the same for every copy, so worked out once."""
    header = _header("From", mail_from)
    sender = getaddresses([str(header)])[0][1]
    return sender, (header.fold(policy=_SMTP), header.fold(policy=_SMTPUTF8))


def _boundary() -> bytes:
    # "=_" never occurs in quoted-printable or base64 text, so the boundary cannot either.
    return b"=_%024x" % random.getrandbits(96)


def _multipart(subtype: str, boundary: bytes, parts: list[bytes]) -> bytes:
    """Headers and body of a multipart entity, laid out as email.generator writes one."""
    delimiter = b"--" + boundary
    head = b'Content-Type: multipart/%s; boundary="%s"\r\n\r\n' % (subtype.encode(), boundary)
    middle = b"\r\n" + delimiter + b"\r\n"
    return head + delimiter + b"\r\n" + middle.join(parts) + b"\r\n" + delimiter + b"--\r\n"


def _qp(text: str) -> bytes:
    """UTF-8, quoted-printable, lines normalised as email.contentmanager normalises them."""
    body = b"\n".join(text.encode("utf-8").splitlines()) + b"\n"
    return binascii.b2a_qp(body, istext=True).replace(b"\n", b"\r\n")


def _attachment(
    data: bytes, content_type: str | None, name: str | None, fold: policies.EmailPolicy[Any]
) -> bytes:
    kind = _header("Content-Type", resumes.served_type("/".join(_mime_type(content_type))))
    filename = name or "resume"
    if ENCODED_WORD in filename:  # percent-encoded as is: the email package would decode it
        disposition = f"Content-Disposition: attachment; {_rfc2231(filename)}\r\n"
    else:
        param = f'filename="{quote(filename)}"' if filename.isascii() else _rfc2231(filename)
        disposition = _header("Content-Disposition", f"attachment; {param}").fold(policy=fold)
    head = (
        kind.fold(policy=fold)
        + "Content-Transfer-Encoding: base64\r\n"
        + _one_header(disposition)
        + "\r\n"
    )
    return head.encode("utf-8") + base64.encodebytes(data).replace(b"\n", b"\r\n")


def _rfc2231(filename: str) -> str:
    return "filename*=" + encode_rfc2231(filename, "utf-8")


def _mime_type(content_type: str | None) -> tuple[str, str]:
    """The résumé's stored type as (maintype, subtype); octet-stream where it says none."""
    maintype, _, subtype = (content_type or "application/octet-stream").partition("/")
    return maintype, subtype or "octet-stream"


def _attach(msg: EmailMessage, data: bytes, content_type: str | None, name: str | None) -> None:
    maintype, subtype = _mime_type(content_type)
    named = resumes.charset(f"{maintype}/{subtype}")
    params = {"charset": named} if named else None
    msg.add_attachment(data, maintype, subtype, filename=name or "resume", params=params)


def _utc(moment: datetime) -> datetime:
    """Aware UTC; a naive value (as SQLite returns) is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _applicant_address(copy: ApplicationCopy) -> Address:
    username, _, domain = copy.email.strip().rpartition("@")
    return Address(display_name=_one_line(copy.name), username=username, domain=domain)


def _subject(copy: ApplicationCopy) -> str:
    subject = f"New application: {copy.job_title}"
    if copy.reference_id is not None:
        subject += f" [{copy.reference_id}]"
    return _one_line(subject)


def _domain(mail_from: str) -> str:
    _, at, domain = parseaddr(mail_from)[1].rpartition("@")
    return domain if at and re.fullmatch(r"[A-Za-z0-9.-]+", domain) else "localhost"


def _rows(copy: ApplicationCopy) -> list[tuple[str, str]]:
    received = _utc(copy.received_at).isoformat().replace("+00:00", "Z")
    resume = (copy.resume_filename or "attached") if copy.resume is not None else "none"
    return [
        ("Job", copy.job_title),
        ("Reference ID", copy.reference_id or "none"),
        ("Job ID", str(copy.job_id) if copy.job_id is not None else "none (job deleted)"),
        ("Employer", copy.employer_name),
        ("Name", copy.name),
        ("Email", copy.email),
        ("Phone", copy.phone or "not given"),
        ("Received", received),
        ("Résumé", resume),
    ]


def _text_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
    lines = [f"{label}: {value}" for label, value in rows]
    return "\n".join([*lines, "", "Cover letter:", cover_letter or "(none)", ""])


def _html_body(rows: list[tuple[str, str]], cover_letter: str | None) -> str:
    cells = "".join(
        f"<tr><th align='left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>\n"
        for k, v in rows
    )
    lines = (cover_letter or "(none)").splitlines()
    letter = "<br>\n".join(html.escape(line) for line in lines)
    return (
        "<!DOCTYPE html>\n<html><body>\n<h1>New application</h1>\n"
        f"<table>\n{cells}</table>\n<h2>Cover letter</h2>\n<p>{letter}</p>\n</body></html>\n"
    )


# How long a connection is kept open unused: tasks come in bursts, and between bursts a
# connection held open would only take up one of the relay's (Postfix's smtpd_timeout is
# 300 s; whichever end gives up first, the next send opens a new one).
IDLE_SECONDS = 5.0


class Relay:
    """One SMTP connection, kept open between the sends of this process (C8, C9 `SMTP_*`).

    A worker sends its copies one after another; a connection of their own each (connect,
    greeting, EHLO, STARTTLS and login when configured, QUIT) costs both ends more than the
    message. A kept connection is checked with RSET before it carries the next message, as
    Postfix checks its cached ones: if the relay has closed it or answers anything but 250,
    a new one is opened, and since no MAIL was sent on the old one nothing can have been
    delivered twice. Any failure during a send closes the connection (the next send opens a
    new one); settings that changed, or IDLE_SECONDS unused, close it too: a background
    thread QUITs it once idle. Sends are serialised: a process has one connection."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._conn: smtplib.SMTP | None = None
        self._settings: SmtpSettings | None = None
        self._last_used = 0.0
        self._closer: threading.Thread | None = None

    def send(self, message: Outgoing, smtp: SmtpSettings) -> None:
        """Send by SMTP; raise TransientFailure or PermanentFailure with the server's reply."""
        try:
            with self._lock:
                conn = self._take(smtp) or _open(smtp)
                with _ended_on_failure(conn):
                    _deliver(conn, message)
                self._keep(conn, smtp)
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()))
            raise _failure(code, text) from exc
        except smtplib.SMTPConnectError as exc:
            raise TransientFailure(_reply(exc.smtp_code, exc.smtp_error)) from exc
        except smtplib.SMTPNotSupportedError as exc:  # an OSError, but no retry mends the relay
            raise PermanentFailure(str(exc)) from exc
        except smtplib.SMTPResponseException as exc:
            raise _failure(exc.smtp_code, exc.smtp_error) from exc
        except OSError as exc:  # refused, timeouts, disconnects, TLS errors
            raise TransientFailure(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """QUIT the kept connection, if any (at exit, or once idle)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            _close(conn)

    def forget(self) -> None:
        """In a forked child: the parent's connection is not this process's to use or QUIT."""
        self._lock = threading.Lock()
        conn, self._conn, self._closer = self._conn, None, None
        if conn is not None:
            conn.close()  # this process's descriptor only: the parent's connection stays

    def _take(self, smtp: SmtpSettings) -> smtplib.SMTP | None:
        """The kept connection, if it is for these settings and answers RSET with 250; it is
        the caller's from then on, kept again only after a send that went through."""
        conn, self._conn = self._conn, None
        if conn is None:
            return None
        if smtp != self._settings or time.monotonic() - self._last_used >= self.idle_seconds:
            _close(conn)
            return None
        try:
            alive = conn.rset()[0] == 250
        except (smtplib.SMTPException, OSError):
            alive = False
        except BaseException:
            conn.close()
            raise
        if not alive:
            conn.close()
            return None
        return conn

    def _keep(self, conn: smtplib.SMTP, smtp: SmtpSettings) -> None:
        self._conn, self._settings, self._last_used = conn, smtp, time.monotonic()
        if self._closer is None:
            self._closer = threading.Thread(
                target=self._close_when_idle, name="smtp-idle-close", daemon=True
            )
            self._closer.start()

    def _close_when_idle(self) -> None:
        while True:
            with self._lock:
                conn = self._conn
                left = self._last_used + self.idle_seconds - time.monotonic()
                if conn is None or left <= 0:
                    self._conn = self._closer = None
                    break
            time.sleep(left)
        if conn is not None:
            _close(conn)  # outside the lock: a silent relay holds up no send meanwhile


RELAY = Relay()  # this process's connection: the worker's, or a pool child's after the fork
os.register_at_fork(after_in_child=RELAY.forget)
atexit.register(RELAY.close)


def send(message: Outgoing, smtp: SmtpSettings) -> None:
    """Send by SMTP over this process's connection (`RELAY`); raise TransientFailure or
    PermanentFailure with the server's reply."""
    RELAY.send(message, smtp)


# Refusals: the server is there and answering, so the conversation ends with QUIT.
_ANSWERED = (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused)


@lru_cache(maxsize=1)
def _local_hostname() -> str:
    """The name given in EHLO: what smtplib would look up for every connection, once."""
    return socket.getfqdn()


def _open(smtp: SmtpSettings) -> smtplib.SMTP:
    """A new connection, greeted, with STARTTLS and login when configured."""
    conn = smtplib.SMTP(
        smtp.host, smtp.port, local_hostname=_local_hostname(), timeout=smtp.timeout
    )
    with _ended_on_failure(conn):
        if smtp.starttls:
            conn.starttls(context=ssl.create_default_context())
            conn.ehlo()
        if smtp.user is not None:
            conn.login(smtp.user, smtp.password or "")
    return conn


@contextmanager
def _ended_on_failure(conn: smtplib.SMTP) -> Iterator[None]:
    """Whatever fails on `conn` ends it: with QUIT after a refusal (the server is there and
    answering), without after a timeout, a lost connection or the task's time limit (no
    reply to QUIT is coming either, so none is awaited)."""
    try:
        yield
    except _ANSWERED:
        _close(conn)
        raise
    except BaseException:
        conn.close()
        raise


def _deliver(conn: smtplib.SMTP, message: Outgoing) -> None:
    options: tuple[str, ...] = ()
    if message.smtputf8:  # as send_message does
        conn.ehlo_or_helo_if_needed()
        if not conn.has_extn("smtputf8"):
            raise smtplib.SMTPNotSupportedError(
                "an address is not ASCII and needs SMTPUTF8, which the relay does not offer"
            )
        options = ("SMTPUTF8", "BODY=8BITMIME")
    conn.sendmail(message.sender, list(message.recipients), message.data, options)


def _close(conn: smtplib.SMTP) -> None:
    """QUIT politely; a failing QUIT must not undo a delivery already accepted."""
    try:
        conn.quit()
    except (smtplib.SMTPException, OSError):
        pass
    finally:
        conn.close()


def _reply(code: int, text: bytes | str) -> str:
    message = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return f"{code} {message}"


def _failure(code: int, text: bytes | str) -> TransientFailure | PermanentFailure:
    reply = _reply(code, text)
    return PermanentFailure(reply) if 500 <= code < 600 else TransientFailure(reply)
