"""An alert's search (C19): as text, the query string the search page writes for its filters,
and in words, as its pages and emails say it.

One stored form, the search page's own (`Filters.to_query`: the query names in NAMES's
order), read back by the search page's own reading (`Filters.from_query`): a name it no
longer has is ignored and a value it no longer takes is dropped, so an alert whose filter
went away grows broader rather than broken.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlencode

from sqlalchemy import Connection

from models.core.i18n import N_, Language
from models.jobs import feeds, workplace
from models.jobs.feeds import Filters
from models.reference.lists import CATEGORY_NAMES, POSITION_TYPE_NAMES

AT_LEAST = N_("at least %(amount)s a year")
SOME_PLACE = N_("location no. %(id)s")  # a place whose name was not looked up


def to_query(filters: Filters) -> str:
    """The filters set, as the search page's address writes them: one search, one text."""
    return urlencode(filters.to_query())


def from_query(query: str) -> Filters:
    """The filters a stored query string names, as the search page would read them."""
    found, _dropped = Filters.from_query(dict(parse_qsl(query)))
    return found


def search_words(connection: Connection, filters: Filters, lang: Language) -> str:
    """`describe`, the place named as the search page names it ("Toronto, ON")."""
    return describe(filters, lang, place_name(connection, filters))


def place_name(connection: Connection, filters: Filters) -> str | None:
    """The name of the search's place, if it has one."""
    return None if filters.place is None else feeds.place_description(connection, filters.place)


def describe(filters: Filters, lang: Language, place: str | None = None) -> str:
    """The search in words, each filter set as a person says it, in the search page's order
    ("“cook” · Quebec · Remote · at least $50,000 a year"), or "All jobs"; `place` is the
    place's name (`search_words` looks it up)."""
    said = [words for words in _words(filters, lang, place) if words]
    return " · ".join(said) or lang.gettext("All jobs")


def _words(filters: Filters, lang: Language, place: str | None) -> list[str | None]:
    _ = lang.gettext
    return [
        _quoted(filters.q, lang),
        _named(CATEGORY_NAMES, filters.category, lang),
        _named(workplace.PROVINCE_NAMES, filters.province, lang),
        None if filters.place is None else place or _(SOME_PLACE) % {"id": filters.place},
        _named(POSITION_TYPE_NAMES, filters.position_type, lang),
        _named(workplace.WORDS, filters.workplace_type, lang),
        None
        if filters.min_pay is None
        else _(AT_LEAST) % {"amount": lang.money(Decimal(filters.min_pay))},
        None if filters.days is None else _days(filters.days, lang),
    ]


def _quoted(q: str | None, lang: Language) -> str | None:
    if not q:
        return None
    return f"«\u00a0{q}\u00a0»" if lang.code == "fr" else f"“{q}”"


def _named(names: Mapping[Any, str], key: object, lang: Language) -> str | None:
    """A value's name in `lang`, None when unset (or, built by hand, not one of `names`)."""
    return lang.gettext(names[key]) if key is not None and key in names else None


def _days(days: int, lang: Language) -> str:
    words = lang.ngettext("posted in the last %(num)s day", "posted in the last %(num)s days", days)
    return words % {"num": lang.number(days)}
