"""Resolving written locations and listing the locations list (C3).

Names are compared by their folded key (`reference.fold`) against `location_names`, which holds
every official and alternate name of each place, so no gazetteer is needed at request time.
Places and their names are reference data that only `jobpost db upgrade` changes: each
process keeps what a name was found to name (`_Named`), so a job's write resolves its
locations without asking the database again. Whether a place is listed is not kept: job
writes change it.
"""

from __future__ import annotations

import difflib
import threading
import time
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    String,
    bindparam,
    case,
    collate,
    func,
    select,
)
from sqlalchemy.orm import InstrumentedAttribute, Session

from models.core import checks
from models.core.errors import FieldError
from models.db.entities import Location, LocationName
from models.db.fast_reads import Precompiled
from models.reference.lists import CITY, PROVINCES, fold

MAX_LENGTH = 300
MAX_SUGGESTIONS = 3
_INT32 = range(-(2**31), 2**31)
_SUGGESTION_POOL = 400  # candidates ranked by difflib, the most populous first
_SUGGESTION_CUTOFF = 0.6

# Folded province name or code -> code ("on", "ontario", "quebec" from "Québec").
_PROVINCE_CODES: dict[str, str] = {
    key: code for _id, code, name, _type in PROVINCES for key in (fold(code), fold(name))
}


class Place(NamedTuple):
    """A location as a job shows it (C3): the members of its read shape."""

    id: int
    name: str
    description: str
    type: str
    latitude: float | None
    longitude: float | None


PLACE_COLUMNS: tuple[Any, ...] = (
    Location.id,
    Location.name,
    Location.description,
    Location.type,
    Location.latitude,
    Location.longitude,
)


def resolve(session: Session, entry: object, field: str) -> Place | FieldError:
    """The location a written `locations` entry names, or the error to report at `field`."""
    if not isinstance(entry, dict):
        return FieldError(field, "invalid_type", "A location must be an object.")
    description, location_id = entry.get("description"), entry.get("id")
    error = _check_description(description, f"{field}.description") or _check_id(
        location_id, f"{field}.id"
    )
    if error:
        return error
    connection = session.connection()
    if isinstance(description, str) and description.strip():
        return _resolve_both(connection, description, location_id, field)
    if isinstance(location_id, int):
        return _resolve_id(connection, location_id, f"{field}.id")
    return FieldError(
        f"{field}.description", "required", "A location needs a description or an id."
    )


def get_listed(session: Session, location_id: int) -> Location | None:
    """A location of the locations list (a listed place or a province), by id."""
    if location_id not in _INT32:
        return None
    stmt = select(Location).where(Location.id == location_id, Location.listed.is_(True))
    return session.scalars(stmt).first()


_LISTED_PLACE = Precompiled(
    select(*PLACE_COLUMNS).where(
        Location.id == bindparam("id", type_=Integer), Location.listed.is_(True)
    )
)


def listed_place(connection: Connection, location_id: int) -> Place | None:
    """`get_listed` as a Place: what a job's write resolves an id to."""
    if location_id not in _INT32:
        return None
    row = _LISTED_PLACE.first(connection, {"id": location_id})
    return None if row is None else Place(*row)


def search(
    session: Session, q: str | None, *, limit: int, offset: int
) -> tuple[list[Location], int]:
    """A page of the locations list and its total; `q` matches any part of a name (C3)."""
    key = fold(q or "")
    stmt = select(Location).where(Location.listed.is_(True))
    if key:
        stmt = stmt.where(Location.name_key.contains(key, autoescape=True))
        ordered = stmt.order_by(func.length(Location.name), Location.population.desc(), Location.id)
    else:
        by_name = (_bytewise(session, Location.name_key), _bytewise(session, Location.name))
        ordered = stmt.order_by(*by_name, Location.id)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    page = session.scalars(ordered.limit(limit).offset(offset)).all()
    return list(page), total


def _bytewise(session: Session, column: InstrumentedAttribute[str]) -> ColumnElement[str]:
    """`column` ordered by code point on either database: SQLite's default, while PostgreSQL
    orders by the column's collation, the database's locale (en_US in the postgres image),
    and a list must read the same on both (C3). Ordered by `name_key` first, the list is
    alphabetical with accents and case aside: Québec beside Quebec."""
    return collate(column, "C" if session.get_bind().dialect.name == "postgresql" else "BINARY")


def _check_description(value: object, field: str) -> FieldError | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return FieldError(field, "invalid_type", "A location description must be a string.")
    if checks.CONTROL.search(value):
        return FieldError(field, "invalid_format", checks.control_message(field))
    if len(value) > MAX_LENGTH:
        return FieldError(
            field, "too_long", f"A location description has at most {MAX_LENGTH} characters."
        )
    return None


def _check_id(value: object, field: str) -> FieldError | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return FieldError(field, "invalid_type", "A location id must be an integer.")
    if value not in _INT32:
        return FieldError(field, "out_of_range", "A location id must be a 32-bit integer.")
    return None


def _resolve_id(connection: Connection, location_id: int, field: str) -> Place | FieldError:
    location = listed_place(connection, location_id)
    if location is None:
        message = f"No location of the locations list has the id {location_id}."
        return FieldError(field, "unknown_location", message, suggestions=[])
    return location


def _resolve_both(
    connection: Connection, description: str, location_id: object, field: str
) -> Place | FieldError:
    """By description; an id given too must name the same place (C3). Where places share a
    description (two Vanier, ON), an id naming one of them says which: the pair a GET returns
    for the less populous one must write back as that place (the symmetry rule, C4)."""
    location = find(connection, description)
    if location is None:
        return _unknown(connection, description, f"{field}.description")
    if location_id is None or location_id == location.id:
        return location
    other = listed_place(connection, location_id) if isinstance(location_id, int) else None
    if other is not None and names(connection, description, other.id):
        return other
    named = f"names {other.description}" if other else "is not in the locations list"
    message = (
        f"The description names {location.description} (id {location.id}), "
        f"but the id {location_id} {named}."
    )
    suggestions = [location.description] + ([other.description] if other else [])
    return FieldError(field, "unknown_location", message, suggestions=suggestions)


def find(connection: Connection, description: str) -> Place | None:
    """The place or province a description names: `City, PC`, `City, Province`, `City`,
    or a province alone; among several places the official name wins, then the most
    populous, then the lowest id, so the answer is deterministic (C3)."""
    parsed = _parse(description)
    found = NAMED.places(connection, *parsed) if parsed else ()
    return found[0] if found else None


def names(connection: Connection, description: str, location_id: int) -> bool:
    """Whether `description` names that place, as the one `find` picks or as another of the
    places it may name."""
    parsed = _parse(description)
    return parsed is not None and any(
        p.id == location_id for p in NAMED.places(connection, *parsed)
    )


def alternatives(connection: Connection, entry: object, chosen: Place) -> list[Place]:
    """The other places a written entry's description names, best first, when the entry
    gives no id to choose among them (C10 `location_ambiguous`). The names were just
    resolved, so this process holds them (`NAMED`)."""
    if not isinstance(entry, dict) or entry.get("id") is not None:
        return []
    description = entry.get("description")
    parsed = _parse(description) if isinstance(description, str) else None
    if parsed is None:
        return []
    found = NAMED.places(connection, *parsed)
    others = {p.id: p for p in found if p.id != chosen.id}
    return list(others.values())


def _parse(description: str) -> tuple[str, str | None] | None:
    """The folded name and the province code (None for a lone name), or None if the
    description cannot name anything."""
    city, comma, province = description.rpartition(",")
    if not comma:
        key = fold(description)
        return (key, None) if key else None
    code = _PROVINCE_CODES.get(fold(province))
    key = fold(city)
    return (key, code) if code is not None and key else None


def _named_by(code: bool) -> Select[Any]:
    """Every place and province a folded name (`key`, and with `code` a province code) may
    name, in the order `find` chooses among them."""
    key = bindparam("key", type_=String)
    stmt = (
        select(*PLACE_COLUMNS)
        .join(LocationName, LocationName.location_id == Location.id)
        .where(LocationName.key == key)
    )
    if code:
        stmt = stmt.where(Location.type == CITY, Location.province_code == bindparam("code"))
    else:  # a lone name: a province first ("Quebec" is the province)
        stmt = stmt.order_by(case((Location.type == CITY, 1), else_=0))
    return stmt.order_by(
        case((Location.name_key == key, 0), else_=1), Location.population.desc(), Location.id
    )


class _Named:
    """What each folded name (with its province code) was found to name, best first, kept
    per process for `MAX_AGE` seconds: a process that outlives a `jobpost db upgrade`
    changing the gazetteer sees the change within that time. At most `MAX_KEYS` names
    are kept (each a few places); beyond them it starts afresh."""

    MAX_AGE = 600.0
    MAX_KEYS = 20_000

    def __init__(self) -> None:
        self.clock = time.monotonic
        self._statements = {
            False: Precompiled(_named_by(False)),
            True: Precompiled(_named_by(True)),
        }
        self._kept: dict[tuple[str, str | None], tuple[float, tuple[Place, ...]]] = {}
        self._lock = threading.Lock()

    def places(self, connection: Connection, key: str, code: str | None) -> tuple[Place, ...]:
        now = self.clock()
        kept = self._kept.get((key, code))
        if kept is not None and now - kept[0] < self.MAX_AGE:
            return kept[1]
        params = {"key": key} if code is None else {"key": key, "code": code}
        rows = self._statements[code is not None].all(connection, params)
        found = tuple(Place(*row) for row in rows)
        with self._lock:
            if len(self._kept) >= self.MAX_KEYS:
                self._kept.clear()
            self._kept[(key, code)] = (now, found)
        return found

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


NAMED = _Named()


def _unknown(connection: Connection, description: str, field: str) -> FieldError:
    suggestions = suggest(connection, description)
    hint = f" Did you mean {' or '.join(suggestions)}?" if suggestions else ""
    message = f"No Canadian place or province matches {description.strip()!r}.{hint}"
    return FieldError(field, "unknown_location", message, suggestions=suggestions)


def suggest(connection: Connection, description: str) -> list[str]:
    """Up to 3 canonical descriptions of the places nearest a description that failed.

    Candidates are the most populous places whose name starts with the same letter (a bounded
    SQL query); difflib ranks them, preferring the written province on equal similarity.
    """
    city, _comma, province = description.rpartition(",")
    key = fold(city or province)
    code = _PROVINCE_CODES.get(fold(province)) if city else None
    if not key:
        return []
    stmt = (
        select(Location.name_key, Location.description, Location.province_code)
        .where(Location.type == CITY, Location.name_key.startswith(key[0], autoescape=True))
        .order_by(Location.population.desc(), Location.id)
        .limit(_SUGGESTION_POOL)
    )
    ranked: list[tuple[float, bool, int, str]] = []
    for rank, (name_key, canonical, province_code) in enumerate(connection.execute(stmt)):
        score = difflib.SequenceMatcher(None, key, name_key).ratio()
        if score >= _SUGGESTION_CUTOFF:
            ranked.append((-score, province_code != code, rank, canonical))
    unique = dict.fromkeys(canonical for *_order, canonical in sorted(ranked))
    return list(unique)[:MAX_SUGGESTIONS]
