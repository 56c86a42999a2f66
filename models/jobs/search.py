"""What `q` looks into (C6): text folded alike on both databases, and the search grams
of PostgreSQL's index (migration 0003)."""

from __future__ import annotations

import unicodedata
from typing import Any

from sqlalchemy import (
    Text,
    func,
)
from sqlalchemy.dialects import postgresql


def fold_for_search(text: str) -> str:
    """Text as `q` compares it (C6): caseless, and one form for what Unicode holds equivalent
    (NFKC around the casefold, in effect Unicode's NFKC_Casefold), so "Montréal" typed with
    a composed é finds a title sent with a decomposed one, and a full-width "ＣＯＯＫ" finds
    "cook". Done in Python so it matches alike on SQLite and PostgreSQL."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def search_text(title: str, reference_id: str | None) -> str:
    """What a search looks into: title and referenceId, folded, with a separator that `q`
    cannot hold (api.query refuses control characters)."""
    return fold_for_search(f"{title}\x1f{reference_id or ''}")


GRAM = 3  # characters in a search gram (migration 0003)


def search_grams(employer_id: Any, content: Any) -> Any:
    """The grams the search index keeps of a job's (employer_id, search_text), or asks of a
    search's (employer id, q): PostgreSQL's `jobpost_search_grams` (migration 0003)."""
    return func.jobpost_search_grams(employer_id, content, type_=postgresql.ARRAY(Text))


def like_pattern(folded: str) -> str:
    """A folded `q` as a LIKE pattern whose `%` and `_` are literal (escaped with `/`)."""
    return folded.replace("/", "//").replace("%", "/%").replace("_", "/_")
