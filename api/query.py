"""Query strings and paging links (C6): strict parameters, absolute links, filters carried."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_plus, unquote_to_bytes, urlencode

import falcon

from api.errors import Problem
from models.core.errors import FieldError

DIGITS = re.compile(r"[0-9]{1,10}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # C0 controls and DEL
INT32_MAX = 2**31 - 1  # page and pageSize are Int32 (interface)


@dataclass(frozen=True)
class Paging:
    page: int
    page_size: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.page_size


def param(req: falcon.Request, name: str, errors: list[FieldError]) -> str | None:
    """A parameter's value; an empty value means absent (C1). Falcon decodes percent-encoded
    bytes that are not UTF-8 to U+FFFD: such a parameter is malformed (C1, C6)."""
    value = req.get_param(name)
    if value and "\ufffd" in value and not _utf8(req.query_string, name):
        message = f"{name} must be UTF-8, percent-encoded."
        errors.append(FieldError(name, "invalid_format", message))
        return None
    return value if value else None


def _utf8(query_string: str, name: str) -> bool:
    """Whether every value of `name` in the raw query string is UTF-8 once percent-decoded."""
    for field in query_string.split("&"):
        key, _, value = field.partition("=")
        if unquote_plus(key) == name:
            try:
                unquote_to_bytes(value.replace("+", " ")).decode("utf-8")
            except UnicodeDecodeError:
                return False
    return True


def term(req: falcon.Request, name: str, errors: list[FieldError]) -> str | None:
    """A search term. A control character is malformed: NUL, which no database text can hold
    (C4), and the others, which no one types into a search; the job list's search text also
    joins title and referenceId with one (U+001F), which a term holding it could match across."""
    value = param(req, name, errors)
    if value is not None and _CONTROL.search(value):
        message = f"{name} must not contain control characters (such as NUL)."
        errors.append(FieldError(name, "invalid_format", message))
        return None
    return value


def invalid(errors: list[FieldError]) -> Problem:
    names = ", ".join(e.field for e in errors)
    return Problem(400, "invalid_query", f"Invalid query parameter: {names}.", errors=errors)


def _bounded(
    req: falcon.Request, name: str, default: int, top: int, errors: list[FieldError]
) -> int:
    raw = param(req, name, errors)
    if raw is None:
        return default
    if not DIGITS.fullmatch(raw):
        errors.append(FieldError(name, "invalid_type", f"{name} must be a whole number."))
        return default
    value = int(raw)
    if not 1 <= value <= top:
        errors.append(FieldError(name, "out_of_range", f"{name} must be 1 to {top}."))
    return value


def number(
    req: falcon.Request, name: str, low: int, top: int, errors: list[FieldError]
) -> int | None:
    """A whole number from `low` to `top`, or None when absent."""
    raw = param(req, name, errors)
    if raw is None:
        return None
    if not DIGITS.fullmatch(raw):
        errors.append(FieldError(name, "invalid_type", f"{name} must be a whole number."))
        return None
    value = int(raw)
    if not low <= value <= top:
        errors.append(FieldError(name, "out_of_range", f"{name} must be {low} to {top}."))
        return None
    return value


def choice(
    req: falcon.Request, name: str, allowed: tuple[str, ...], errors: list[FieldError]
) -> str | None:
    raw = param(req, name, errors)
    if raw is not None and raw not in allowed:
        errors.append(
            FieldError(name, "out_of_range", f"{name} must be one of {', '.join(allowed)}.")
        )
        return None
    return raw


def paging(req: falcon.Request, errors: list[FieldError]) -> Paging:
    return Paging(
        page=_bounded(req, "page", 1, INT32_MAX, errors), page_size=page_size(req, errors)
    )


def page_size(req: falcon.Request, errors: list[FieldError]) -> int:
    return _bounded(req, "pageSize", 10, 100, errors)


def paging_object(
    req: falcon.Request,
    public_base_url: str,
    p: Paging,
    total: int,
    filters: dict[str, str | None],
) -> dict[str, object]:
    """The paging member, with `previous`/`next` carrying the supplied filters (C6)."""
    pages = -(-total // p.page_size)
    carried = {k: v for k, v in filters.items() if v is not None}

    def link(page: int) -> str:
        query = urlencode({**carried, "pageSize": p.page_size, "page": page})
        return f"{public_base_url}{req.path}?{query}"

    previous = link(p.page - 1) if p.page > 1 else None
    following = link(p.page + 1) if p.page < pages else None
    links(req, prev=previous, next=following)
    return {
        "total": total,
        "page": p.page,
        "pages": pages,
        "pageSize": p.page_size,
        "previous": previous,
        "next": following,
    }


def links(req: falcon.Request, **targets: str | None) -> None:
    """The page's RFC 8288 links by relation (`next`, `prev`), for the Link header that
    api.middleware.Links writes on a successful answer (C23)."""
    req.context.links = {rel: url for rel, url in targets.items() if url is not None}
