"""The employer's copy of an application (C8 Delivery), written as the bytes that are sent.

`render` writes a copy as the bytes that are sent, in one pass: the headers that carry
applicant or job data are folded by the email package's own header classes (encoded words,
quoting, folding: the same header lines `EmailMessage` writes), the bodies are encoded by
`binascii` (quoted-printable, base64), and the MIME skeleton around them is written out.
`build_message` (tests/workers/mail_reference.py) builds the same copy part by part with
`EmailMessage`: plain to read, but far more work (every header is parsed as it is set, and
smtplib's send_message flattens the tree again; docs/benchmarks.md). The tests hold `render`
to it: same headers, same MIME structure, same decoded content (a value holding an RFC 2047
encoded word aside: `render` writes it as given, where `build_message` lets the email
package decode it). The bytes differ where the email package is loose: it breaks
quoted-printable lines at 78 characters (RFC 2045 says 76), and send_message writes a line
of the cover letter that starts with "From " as ">From " (a precaution for mbox files).
"""

from __future__ import annotations

import base64
import binascii
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email import policy as policies
from email.header import Header
from email.headerregistry import Address, BaseHeader, HeaderRegistry
from email.utils import encode_rfc2231, format_datetime, getaddresses, quote
from functools import lru_cache
from typing import Any

from models.applications import resumes
from models.core.checks import ENCODED_WORD
from workers.mail.content import (
    ApplicationCopy,
    applicant_address,
    html_body,
    message_id,
    sender_domain,
    subject_of,
    summary_rows,
    text_body,
    utc,
)


@dataclass(frozen=True)
class Outgoing:
    """A rendered copy: its SMTP envelope and its bytes (CRLF line ends), ready to send."""

    sender: str
    recipients: tuple[str, ...]
    data: bytes
    smtputf8: bool  # an envelope address is not ASCII: the relay must offer SMTPUTF8


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


def render(copy: ApplicationCopy, *, mail_from: str, bounces_to: str | None = None) -> Outgoing:
    """The copy as sent (C8): the message the tests' `build_message` builds, with its envelope as
    smtplib's send_message would take it from the headers; its envelope sender `bounces_to`
    when given (C22's VERP address)."""
    sender, from_line = _from(mail_from)
    sender = bounces_to or sender
    to = _header("To", copy.to)
    recipients = tuple(address for _, address in getaddresses([str(to)]))
    reply_to = applicant_address(copy)
    # An address outside ASCII, the applicant's too, is written as UTF-8 (RFC 6532): as an
    # encoded word it would be no address at all (RFC 2047 section 5).
    smtputf8 = not "".join([sender, *recipients, reply_to.addr_spec]).isascii()
    fold = _SMTPUTF8 if smtputf8 else _SMTP
    head = [
        _one_header(to.fold(policy=fold)),
        from_line[smtputf8],
        _one_header(_reply_to(reply_to, fold)),
        _one_header(_subject_line(subject_of(copy), fold)),
        f"Message-ID: {message_id(copy.application_id, sender_domain(mail_from))}\r\n",
        f"Date: {format_datetime(utc(copy.received_at))}\r\n",
        "MIME-Version: 1.0\r\n",
    ]
    lines = summary_rows(copy)
    inner = _boundary()
    parts = [
        b"Content-Type: text/plain; "
        + _TEXT_HEADERS
        + _qp(text_body(lines, copy.cover_letter, copy.language)),
        b"Content-Type: text/html; "
        + _TEXT_HEADERS
        + _qp(html_body(lines, copy.cover_letter, copy.language)),
    ]
    body = _multipart("alternative", inner, parts)
    if copy.resume is not None:
        attachment = _attachment(copy.resume, copy.resume_content_type, copy.resume_filename, fold)
        body = _multipart("mixed", _boundary(), [body, attachment])
    data = "".join(head).encode("utf-8" if smtputf8 else "ascii") + body
    return Outgoing(sender, recipients, data, smtputf8)


def render_text(
    *,
    mail_from: str,
    to: str,
    subject: str,
    message_id: str,
    date: str,
    body: str,
    reply_to: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> Outgoing:
    """A plain-text email as sent (C13's report email, C19's alerts), its headers written as
    the copy's: a value holding encoded words or line breaks writes no header of its own,
    whatever the Python patch level (gh-121650); ValueError when a header would not be one
    line. `headers` are ASCII lines of the service's own (List-Unsubscribe, C19)."""
    sender, from_line = _from(mail_from)
    to_header = _header("To", to)
    recipients = tuple(address for _, address in getaddresses([str(to_header)]))
    smtputf8 = not "".join([sender, *recipients, reply_to or ""]).isascii()
    fold = _SMTPUTF8 if smtputf8 else _SMTP
    head = [_one_header(to_header.fold(policy=fold)), from_line[smtputf8]]
    if reply_to:
        head.append(_one_header(_header("Reply-To", reply_to).fold(policy=fold)))
    head += [
        _one_header(_subject_line(subject, fold)),
        _one_header(f"Date: {date}\r\n"),
        _one_header(f"Message-ID: {message_id}\r\n"),
        *(_one_header(f"{name}: {value}\r\n") for name, value in headers),
        "MIME-Version: 1.0\r\n",
    ]
    text = b"Content-Type: text/plain; " + _TEXT_HEADERS + _qp(body)
    data = "".join(head).encode("utf-8" if smtputf8 else "ascii") + text
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
    kind = _header("Content-Type", resumes.served_type("/".join(mime_type(content_type))))
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


def mime_type(content_type: str | None) -> tuple[str, str]:
    """The résumé's stored type as (maintype, subtype); octet-stream where it says none."""
    maintype, _, subtype = (content_type or "application/octet-stream").partition("/")
    return maintype, subtype or "octet-stream"
