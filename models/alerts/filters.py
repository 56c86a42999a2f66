"""An alert's search as text (C19): the feed's `Filters` as a normalised query string.

Both directions iterate the dataclass's fields, so a filter added to `Filters` is stored and
read back by alerts with no change here: each value is written as text and read back through
its field's type (`int | None` → int, `Decimal | None` → Decimal, `str | None` → str).
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields
from functools import cache
from typing import Any
from urllib.parse import parse_qsl, urlencode

from models.core.i18n import Language
from models.jobs.feeds import Filters
from models.reference.lists import CATEGORY_NAMES, PROVINCES

PROVINCE_NAMES = {code: name for _id, code, name, _kind in PROVINCES}


@cache
def _types() -> dict[str, type]:
    """Each field's value type, its optional `None` taken away."""
    hints = typing.get_type_hints(Filters)
    found: dict[str, type] = {}
    for field in fields(Filters):
        hint: Any = hints[field.name]
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        found[field.name] = typing.get_origin(hint) or hint
    return found


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def to_query(filters: Filters) -> str:
    """The filters set, by name, as a query string: one search, one text."""
    pairs = [
        (f.name, _text(value))
        for f in sorted(fields(Filters), key=lambda f: f.name)
        if (value := getattr(filters, f.name)) is not None and value != ""
    ]
    return urlencode(pairs)


def from_query(query: str) -> Filters:
    """The filters a stored query string names; a name `Filters` no longer has is ignored,
    so a filter taken away leaves its alerts broader rather than broken."""
    kinds = _types()
    values: dict[str, Any] = {}
    for name, raw in parse_qsl(query, keep_blank_values=False):
        kind = kinds.get(name)
        if kind is None:
            continue
        values[name] = _value(kind, raw)
    return Filters(**values)


def _value(kind: type, raw: str) -> Any:
    if kind is bool:
        return raw == "true"
    return kind(raw)


def set_values(filters: Filters) -> list[tuple[str, Any]]:
    """The filters that are set, (name, value), in the dataclass's order."""
    return [
        (f.name, value)
        for f in fields(Filters)
        if (value := getattr(filters, f.name)) is not None and value != ""
    ]


def describe(filters: Filters, lang: Language) -> str:
    """The search in words: each filter that is set, or "All jobs"."""
    said: list[str] = []
    for name, value in set_values(filters):
        if name == "q":
            said.append(f"«\u00a0{value}\u00a0»" if lang.code == "fr" else f"“{value}”")
        elif name == "category" and value in CATEGORY_NAMES:
            said.append(lang.gettext(CATEGORY_NAMES[value]))
        elif name == "province" and value in PROVINCE_NAMES:
            said.append(lang.gettext(PROVINCE_NAMES[value]))
        else:
            said.append(f"{name}: {value}")
    return " · ".join(said) or lang.gettext("All jobs")
