"""Field checks shared by job and application rules (C4, C8).

Each check returns the normalised value or raises `Invalid` carrying the C1 entry; rule
modules catch it per field so that every broken rule is reported, not only the first.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from email_validator import EmailNotValidError, validate_email

from models.core.errors import FieldError

INT32 = (-(2**31), 2**31 - 1)
DATE_SHAPE = re.compile(r"\d{4}-\d{2}-\d{2}")
# C0, DEL and C1: a one-line field holds none. A name or a title goes into mail headers and
# subjects, whose guards refuse a line break: accepted, the copy could never be sent (C8).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class Invalid(Exception):
    def __init__(self, field: str, code: str, message: str) -> None:
        super().__init__(message)
        self.error = FieldError(field, code, message)


def string(
    value: Any,
    field: str,
    *,
    max_len: int,
    min_len: int = 1,
    trim: bool = False,
    multiline: bool = False,
) -> str:
    """A string field. One line unless `multiline` (description, coverLetter, details…),
    which may hold tabs and line breaks but never NUL, which no database text can hold."""
    if not isinstance(value, str):
        raise Invalid(field, "invalid_type", f"{field} must be a string.")
    text: str = value.strip() if trim else value
    if multiline and "\x00" in text:
        raise Invalid(field, "invalid_format", f"{field} must not contain a NUL character.")
    if not multiline:
        one_line(text, field)
    if len(text) < min_len:
        raise Invalid(field, "too_short", f"{field} must not be empty.")
    if len(text) > max_len:
        raise Invalid(field, "too_long", f"{field} has at most {max_len} characters.")
    return text


def one_line(text: str, field: str) -> None:
    """Refuse a control character (C0, DEL, C1; tab and line breaks included) in a one-line
    field, naming the field (C1's per-field errors)."""
    if CONTROL.search(text):
        raise Invalid(field, "invalid_format", control_message(field))


def control_message(field: str) -> str:
    return (
        f"{field} must be one line without control characters (U+0000 to U+001F, U+007F to U+009F)."
    )


def boolean(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(field, "invalid_type", f"{field} must be true or false.")
    return value


def int32(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(field, "invalid_type", f"{field} must be an integer.")
    if not INT32[0] <= value <= INT32[1]:
        raise Invalid(field, "out_of_range", f"{field} must be a 32-bit integer.")
    return value


def obj(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(field, "invalid_type", f"{field} must be an object.")
    return value


def array(value: Any, field: str, *, least: int, most: int, noun: tuple[str, str]) -> list[Any]:
    if not isinstance(value, list):
        raise Invalid(field, "invalid_type", f"{field} must be an array.")
    if len(value) < least:
        raise Invalid(field, "too_few", f"At least {_count(least, noun)} required.")
    if len(value) > most:
        raise Invalid(field, "too_many", f"At most {_count(most, noun)} allowed.")
    return value


def _count(n: int, noun: tuple[str, str]) -> str:
    """E.g. "1 location is", "3 locations are"."""
    return f"1 {noun[0]} is" if n == 1 else f"{n} {noun[1]} are"


def iso_date(value: Any, field: str) -> date:
    if not isinstance(value, str):
        raise Invalid(field, "invalid_type", f"{field} must be a date string (YYYY-MM-DD).")
    try:
        if not DATE_SHAPE.fullmatch(value):
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise Invalid(field, "invalid_format", f"{field} must be a date as YYYY-MM-DD.") from None


_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def instant(value: Any, field: str) -> datetime:
    """An RFC 3339 date-time with its offset (`2026-11-25T15:05:09.962Z`), as an aware UTC
    instant; fractions past microseconds are cut, never rounded up (C10)."""
    if not isinstance(value, str):
        raise Invalid(field, "invalid_type", f"{field} must be a string.")
    text = value
    try:
        if not _RFC3339.fullmatch(text):
            raise ValueError
        fraction = re.search(r"\.(\d+)", text)
        if fraction:  # Python reads at most microseconds
            text = text.replace(fraction.group(0), "." + fraction.group(1)[:6].ljust(6, "0"))
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):  # 25:00, February 30, a year past 9999 in UTC
        message = f"{field} must be an RFC 3339 date-time, such as 2026-11-25T15:05:09.962Z."
        raise Invalid(field, "invalid_format", message) from None


def amount(value: Any, field: str) -> Decimal:
    """A money amount: a JSON number, 0 <= x < 10^10, at most 2 decimals (C4)."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise Invalid(field, "invalid_type", f"{field} must be a number.")
    number = Decimal(value)
    if not number.is_finite() or not 0 <= number < 10**10:
        raise Invalid(field, "out_of_range", f"{field} must be at least 0 and below 10000000000.")
    if number != number.quantize(Decimal("0.01")):
        raise Invalid(field, "invalid_format", f"{field} has at most 2 decimals.")
    return number.quantize(Decimal("0.01"))


# "=?" begins an RFC 2047 encoded word. An address may hold one by RFC 5322, but the email
# package decodes it in the headers of the employer's copy, where it could write a line break
# (workers.mail); no real mailbox needs one.
ENCODED_WORD = "=?"


@functools.lru_cache(maxsize=4096)
def _valid_address(text: str) -> bool:
    """An employer's systems send the same few routing addresses with every write."""
    try:
        validate_email(text, check_deliverability=False, test_environment=True)
    except EmailNotValidError:
        return False
    return True


def email(value: Any, field: str, *, max_len: int) -> str:
    """Address syntax only: no DNS look-up; special-use test domains are accepted (C4)."""
    text = string(value, field, max_len=max_len, trim=True)
    if not _valid_address(text):
        raise Invalid(field, "invalid_format", f"{field} is not a valid email address.")
    if ENCODED_WORD in text:  # valid syntax, but mail software would decode it (C8)
        raise Invalid(field, "invalid_format", f"{field} must not contain “=?”.")
    return text


def url(value: Any, field: str, *, max_len: int) -> str:
    """An absolute http or https URL with a host (C4)."""
    text = string(value, field, max_len=max_len, trim=True)
    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        ok = ok and not any(c.isspace() or ord(c) < 32 for c in text)
    except ValueError:
        ok = False
    if not ok:
        raise Invalid(
            field, "invalid_format", f"{field} must be an absolute http:// or https:// URL."
        )
    return text
