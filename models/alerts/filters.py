"""An alert's search as text (C19): the query string the search page writes for its filters.

One stored form, the search page's own (`Filters.to_query`: the query names in NAMES's
order), read back by the search page's own reading (`Filters.from_query`): a name it no
longer has is ignored and a value it no longer takes is dropped, so an alert whose filter
went away grows broader rather than broken.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any
from urllib.parse import parse_qsl, urlencode

from models.core.i18n import Language
from models.jobs.feeds import Filters
from models.reference.lists import CATEGORY_NAMES, PROVINCES

PROVINCE_NAMES = {code: name for _id, code, name, _kind in PROVINCES}


def to_query(filters: Filters) -> str:
    """The filters set, as the search page's address writes them: one search, one text."""
    return urlencode(filters.to_query())


def from_query(query: str) -> Filters:
    """The filters a stored query string names, as the search page would read them."""
    found, _dropped = Filters.from_query(dict(parse_qsl(query)))
    return found


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
