"""The gazetteer load, location resolution and the locations list (contract C3, C1)."""

from __future__ import annotations

import logging
import sys
import unicodedata
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session, sessionmaker

from models.core.errors import FieldError
from models.db.engines import make_engine
from models.db.entities import Base, Category, Location, LocationName, PositionType, SalaryPeriod
from models.db.unit_of_work import make_sessionmaker
from models.reference import lists as reference
from models.reference.lists import CATEGORIES, LISTED_POPULATION, fold, load
from models.reference.places import NAMED, Place, get_listed, resolve, search

TORONTO = 6167865
MONTREAL = 6077243
VANCOUVER = 6173331
VANDERHOOF = 6173361  # 4,346 people: in the gazetteer, not in the initial locations list
ONTARIO = 9
VANIER, VANIER_SMALLER = 6173404, 13580764  # both Vanier, ON


@pytest.fixture(scope="module")
def factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sessionmaker[Session]]:
    path: Path = tmp_path_factory.mktemp("places") / "jobpost.db"
    engine = make_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    factory = make_sessionmaker(engine)
    with factory() as session:
        load(session)
        session.commit()
    yield factory
    engine.dispose()


@pytest.fixture
def session(factory: sessionmaker[Session]) -> Iterator[Session]:
    with factory() as session:
        yield session
        session.rollback()


def _count(session: Session, *where: ColumnElement[bool]) -> int:
    return session.scalar(select(func.count()).select_from(Location).where(*where)) or 0


def _snapshot(session: Session) -> tuple[list[tuple[object, ...]], ...]:
    tables = (Location, LocationName, PositionType, Category, SalaryPeriod)
    return tuple(sorted(tuple(row) for row in session.execute(select(t.__table__))) for t in tables)


def _error(result: Place | FieldError) -> FieldError:
    assert isinstance(result, FieldError), result
    return result


def _place(result: Place | FieldError) -> Place:
    assert isinstance(result, Place), result
    return result


# --- load -------------------------------------------------------------------------------------


def test_load_fills_reference_lists_and_gazetteer(session: Session) -> None:
    """C3: fixed lists, the 13 provinces and territories, about 3,250 GeoNames places."""
    assert session.scalar(select(func.count()).select_from(Category)) == len(CATEGORIES) == 30
    assert session.get_one(PositionType, 1).name == "Full Time"
    assert session.get_one(SalaryPeriod, 5).unit == "hour"
    assert _count(session, Location.type != "City") == 13
    assert 3200 <= _count(session, Location.type == "City") <= 3300
    large = _count(session, Location.type == "City", Location.population >= LISTED_POPULATION)
    assert _count(session, Location.listed.is_(True)) == 13 + large


def test_provinces_have_fixed_ids_and_full_names(session: Session) -> None:
    """C3: ids 1 to 13 in code order, name and description the full name, no coordinates."""
    provinces = session.scalars(select(Location).where(Location.id <= 13).order_by(Location.id))
    codes = " ".join(p.province_code for p in provinces)
    assert codes == "AB BC MB NB NL NS NT NU ON PE QC SK YT"
    ontario = session.get(Location, ONTARIO)
    assert ontario is not None
    assert (ontario.name, ontario.description, ontario.type) == ("Ontario", "Ontario", "Province")
    assert ontario.latitude is None and ontario.longitude is None and ontario.listed
    assert session.get_one(Location, 8).type == "Territory"


def test_second_load_changes_nothing_and_keeps_added_places_listed(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    """C3: a gazetteer place added to the list by a job write stays listed after a re-run."""
    with factory() as session:
        session.get_one(Location, VANDERHOOF).listed = True
        session.commit()
        before = _snapshot(session)
    try:
        with caplog.at_level(logging.INFO, logger="models.reference.lists"), factory() as session:
            load(session)
            session.commit()
            assert _snapshot(session) == before
        assert "0 locations added, 0 updated, 0 names added, 0 removed" in caplog.text
    finally:
        with factory() as session:
            session.get_one(Location, VANDERHOOF).listed = False
            session.commit()


def test_load_repairs_changed_rows_and_stale_names(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    """C9: `db upgrade` is idempotent; a re-run puts the gazetteer's values back."""
    with factory() as session:
        session.get_one(Location, TORONTO).population = 1
        session.add(LocationName(key="hogtown", location_id=TORONTO))
        session.commit()
    with caplog.at_level(logging.INFO, logger="models.reference.lists"), factory() as session:
        load(session)
        session.commit()
        assert session.get_one(Location, TORONTO).population > 2_000_000
        assert session.get(LocationName, ("hogtown", TORONTO)) is None
    assert "0 locations added, 1 updated, 0 names added, 1 removed" in caplog.text


# --- fold -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("Montreal", "Montréal"),
        ("st. john's", "St. John's"),
        ("St Johns", "St. John's"),
        ("saint jerome", "Saint-Jérôme"),
        ("  QUÉBEC  ", "Quebec"),
        ("on", "ON"),
    ],
)
def test_fold_ignores_case_accents_and_punctuation(written: str, name: str) -> None:
    """C3: resolution is case-, accent- and whitespace-insensitive."""
    assert fold(written) == fold(name)


def test_fold_keeps_like_wildcards() -> None:
    """C6 (for the locations list too): % and _ are literal characters in `q`."""
    assert fold("50%_") == "50%_"


def _fold_by_character(text: str) -> str:
    """fold as first written: every character tested for a combining mark."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(bare.casefold().translate(reference._FOLD_TABLE).split())


def test_fold_drops_every_combining_mark_as_a_test_per_character_would() -> None:
    """The one-translate fold equals the per-character one over every code point."""
    assert not any(unicodedata.combining(chr(c)) for c in range(0x20000, sys.maxunicode + 1))
    for start in range(0, sys.maxunicode + 1, 4096):
        chunk = "".join(
            f"a{chr(c)}é "
            for c in range(start, min(start + 4096, sys.maxunicode + 1))
            if not 0xD800 <= c <= 0xDFFF
        )
        assert fold(chunk) == _fold_by_character(chunk), hex(start)


# --- resolve by description -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "location_id"),
    [
        ("Toronto, ON", TORONTO),
        ("Montreal, QC", MONTREAL),
        ("montréal, quebec", MONTREAL),
        ("  toronto ,  on ", TORONTO),
        ("toronto,on", TORONTO),
        ("Toronto, Ontario", TORONTO),
        ("Saint-Jerome, QC", 6138501),
        ("st johns, NL", 6324733),
        ("Quebec City", 6325494),  # a GeoNames alternate name
        ("Québec, QC", 6325494),
        ("Ontario", ONTARIO),
        ("ON", ONTARIO),
        ("quebec", 11),  # a province alone wins over the city of the same name
        ("Yukon", 13),
    ],
)
def test_resolve_description(session: Session, description: str, location_id: int) -> None:
    """C3: `City, PC`, `City, Province Name`, alternate names, provinces by name or code."""
    assert _place(resolve(session, {"description": description}, "locations[0]")).id == (
        location_id
    )


def test_resolved_place_has_canonical_description(session: Session) -> None:
    """C3: the canonical description `Toronto, ON` is what a GET returns."""
    toronto = _place(resolve(session, {"description": "TORONTO, on"}, "locations[0]"))
    assert (toronto.id, toronto.name, toronto.description, toronto.type) == (
        TORONTO,
        "Toronto",
        "Toronto, ON",
        "City",
    )
    assert toronto.latitude == pytest.approx(43.70, abs=0.01)


def test_city_alone_is_the_most_populous(session: Session) -> None:
    """C3: `City` alone names the most populous place of that name."""
    victoria = _place(resolve(session, {"description": "Victoria"}, "locations[0]"))
    others = select(Location.population).where(Location.name == "Victoria")
    assert victoria.description == "Victoria, BC"
    assert session.get_one(Location, victoria.id).population == max(session.scalars(others))
    toronto = _place(resolve(session, {"description": "Toronto"}, "locations[0]"))
    assert toronto.id == TORONTO


def test_pair_naming_several_places_is_the_most_populous(session: Session) -> None:
    """C3: two places called Douglas in BC: the more populous (the higher id here)."""
    douglases = session.scalars(select(Location).where(Location.description == "Douglas, BC"))
    populations = {d.id: d.population for d in douglases}
    assert len(populations) == 2
    chosen = _place(resolve(session, {"description": "douglas, bc"}, "locations[0]"))
    assert chosen.id == max(populations, key=lambda i: populations[i]) == 13512981


def test_official_name_wins_over_an_alternate_name(session: Session) -> None:
    """C3 (deterministic): `Saint John` is Saint John, NB, not St. John's (alternate name)."""
    assert _place(resolve(session, {"description": "Saint John"}, "l")).description == (
        "Saint John, NB"
    )


def test_unknown_description_suggests_nearest_places(session: Session) -> None:
    """C3, C1: `unknown_location` with up to 3 suggestions, also named in the message."""
    error = _error(resolve(session, {"description": "Torontoo, ON"}, "locations[1]"))
    assert (error.field, error.code) == ("locations[1].description", "unknown_location")
    assert error.suggestions is not None and 1 <= len(error.suggestions) <= 3
    assert error.suggestions[0] == "Toronto, ON"
    assert "Torontoo, ON" in error.message and "Toronto, ON" in error.message


@pytest.mark.parametrize(
    "description", ["Toronto, XX", "Atlantis", "Toronto, ON, Canada", ", ON", "Ontario, ON"]
)
def test_anything_else_is_unknown(session: Session, description: str) -> None:
    """C3: anything else is a 422 entry `unknown_location`, with a suggestions list."""
    error = _error(resolve(session, {"description": description}, "locations[0]"))
    assert error.code == "unknown_location"
    assert isinstance(error.suggestions, list) and len(error.suggestions) <= 3


@pytest.mark.parametrize("description", [",", "-", " . ", "'"])
def test_a_description_of_separators_alone_is_unknown_without_suggestions(
    session: Session, description: str
) -> None:
    """C3: a description that folds to nothing names no place and has nothing to suggest."""
    error = _error(resolve(session, {"description": description}, "locations[0]"))
    assert (error.field, error.code, error.suggestions) == (
        "locations[0].description",
        "unknown_location",
        [],
    )


@pytest.mark.parametrize("description", ["Qxzzyqw", "Qxzzyqw, QC", "_oronto", "%oronto, ON"])
def test_a_description_near_no_place_has_no_suggestions(session: Session, description: str) -> None:
    """C3: suggestions are places near the description (same first character, close enough);
    `_` and `%` are characters, not wildcards, so "_oronto" is near no place."""
    error = _error(resolve(session, {"description": description}, "locations[0]"))
    assert (error.code, error.suggestions) == ("unknown_location", [])


def test_wrong_province_suggests_the_right_one(session: Session) -> None:
    """C3: suggestions are canonical descriptions of the nearest places."""
    error = _error(resolve(session, {"description": "Toronto, QC"}, "locations[0]"))
    assert error.suggestions is not None and "Toronto, ON" in error.suggestions


# --- resolve by id, both, and types -----------------------------------------------------------


def test_listed_id_resolves(session: Session) -> None:
    """C3: an entry may give only `id`, a locations-list id (places and provinces)."""
    assert _place(resolve(session, {"id": VANCOUVER}, "locations[0]")).name == "Vancouver"
    assert _place(resolve(session, {"id": ONTARIO}, "locations[0]")).name == "Ontario"


@pytest.mark.parametrize("location_id", [VANDERHOOF, 42, 0, -1])
def test_id_outside_the_list_is_unknown(session: Session, location_id: int) -> None:
    """C3: an id that is not in the locations list (even a gazetteer place) is unknown."""
    error = _error(resolve(session, {"id": location_id}, "locations[2]"))
    assert (error.field, error.code, error.suggestions) == (
        "locations[2].id",
        "unknown_location",
        [],
    )


def test_unlisted_place_resolves_by_description(session: Session) -> None:
    """C3: a valid Canadian location absent from the list is accepted on write."""
    place = _place(resolve(session, {"description": "Vanderhoof, BC"}, "locations[0]"))
    assert (place.id, session.get_one(Location, place.id).listed) == (VANDERHOOF, False)


def test_id_and_description_must_agree(session: Session) -> None:
    """C3: when both are given they must name the same place."""
    same = {"id": TORONTO, "description": "toronto, on"}
    assert _place(resolve(session, same, "locations[0]")).id == TORONTO
    error = _error(resolve(session, {"id": ONTARIO, "description": "Toronto, ON"}, "locations[0]"))
    assert (error.field, error.code) == ("locations[0]", "unknown_location")
    assert error.suggestions == ["Toronto, ON", "Ontario"]


def test_an_id_says_which_of_the_places_sharing_a_description(session: Session) -> None:
    """C3 and the symmetry rule (C4): the id and description a GET returns for a place whose
    canonical description another listed place shares (two Vanier, ON) name that place."""
    shared = (
        select(Location.description)
        .where(Location.listed.is_(True))
        .group_by(Location.description)
        .having(func.count() > 1)
    )
    places = session.scalars(
        select(Location).where(Location.listed.is_(True), Location.description.in_(shared))
    ).all()
    assert {p.description for p in places} == {"Vanier, ON", "Sainte-Catherine, QC"}
    assert {VANIER, VANIER_SMALLER} <= {p.id for p in places}
    for place in places:
        entry = {"id": place.id, "description": place.description}
        assert _place(resolve(session, entry, "locations[0]")).id == place.id
    # The description alone still names the most populous; an id it does not name still fails.
    assert _place(resolve(session, {"description": "Vanier, ON"}, "l")).id == VANIER
    error = _error(resolve(session, {"id": TORONTO, "description": "Vanier, ON"}, "l"))
    assert error.code == "unknown_location"


def test_read_only_members_are_ignored(session: Session) -> None:
    """C3: name, type, latitude and longitude are read-only and ignored."""
    entry = {"description": "Toronto, ON", "name": "Ottawa", "type": "Province", "latitude": 1}
    assert _place(resolve(session, entry, "locations[0]")).id == TORONTO


@pytest.mark.parametrize(
    ("entry", "field", "code"),
    [
        ("Toronto, ON", "locations[0]", "invalid_type"),
        (None, "locations[0]", "invalid_type"),
        ({}, "locations[0].description", "required"),
        ({"name": "Toronto"}, "locations[0].description", "required"),
        ({"description": "   "}, "locations[0].description", "required"),
        ({"description": 5}, "locations[0].description", "invalid_type"),
        ({"description": ["Toronto"]}, "locations[0].description", "invalid_type"),
        ({"description": "Tor\x00onto"}, "locations[0].description", "invalid_format"),
        ({"description": "T" * 301}, "locations[0].description", "too_long"),
        ({"id": "9"}, "locations[0].id", "invalid_type"),
        ({"id": True}, "locations[0].id", "invalid_type"),
        ({"id": Decimal("9.0")}, "locations[0].id", "invalid_type"),
        ({"id": 2**31}, "locations[0].id", "out_of_range"),
        ({"id": "x", "description": "Toronto, ON"}, "locations[0].id", "invalid_type"),
    ],
)
def test_invalid_entries(session: Session, entry: object, field: str, code: str) -> None:
    """C3, C4: strict types, NUL is `invalid_format`, a wrong type is a 422 for that field."""
    error = _error(resolve(session, entry, "locations[0]"))
    assert (error.field, error.code) == (field, code)


# --- the locations list -----------------------------------------------------------------------


def test_get_listed(session: Session) -> None:
    """C3: GET /locations/{id} serves listed places and provinces only."""
    assert get_listed(session, TORONTO) is not None
    assert get_listed(session, ONTARIO) is not None
    assert get_listed(session, VANDERHOOF) is None
    assert get_listed(session, 2**40) is None


def test_search_shortest_names_first(session: Session) -> None:
    """C3: `q` matches any part of a name; shortest first, then larger population, then id.

    Vanderhoof (4,346 people) is not in the initial list (population under 15,000)."""
    page, total = search(session, "van", limit=100, offset=0)
    assert [(p.name, p.population) for p in page][:4] == [
        ("Vanier", 17000),  # two places called Vanier in Ontario: the larger first
        ("Vanier", 15249),
        ("Evanston", 18710),
        ("Vancouver", 662248),
    ]
    names = [p.name for p in page]
    assert names.index("West Vancouver") < names.index("North Vancouver")
    assert "Vanderhoof" not in names
    assert total == len(page) == 9
    keys = [(len(p.name), -p.population, p.id) for p in page]
    assert keys == sorted(keys)


def test_search_folds_the_query(session: Session) -> None:
    """C3: accent- and case-insensitive (`MONTREAL` finds Montréal)."""
    page, _total = search(session, "MONTREAL", limit=5, offset=0)
    assert page[0].id == MONTREAL


@pytest.mark.parametrize("q", ["%", "_", "van%", "v_n"])
def test_search_wildcards_are_literal(session: Session, q: str) -> None:
    """C6 (paged lists): % and _ are literal characters, so they match nothing here."""
    assert search(session, q, limit=10, offset=0) == ([], 0)


@pytest.mark.parametrize("q", [None, "", "  "])
def test_search_without_q_is_by_name(session: Session, q: str | None) -> None:
    """C3: without `q`, the whole list by name, accents and case aside (then id)."""
    page, total = search(session, q, limit=1000, offset=0)
    assert total == len(page) == _count(session, Location.listed.is_(True))
    by_name = sorted(page, key=lambda p: (fold(p.name), p.name, p.id))
    assert [(p.name, p.id) for p in page] == [(p.name, p.id) for p in by_name]


def test_search_pages(session: Session) -> None:
    """C6: limit/offset pages are consecutive slices of one order; the total is unchanged."""
    everything, total = search(session, "van", limit=100, offset=0)
    pages = [search(session, "van", limit=4, offset=o) for o in (0, 4, 8, 12)]
    assert [t for _p, t in pages] == [total] * 4
    assert [p.id for page, _t in pages for p in page] == [p.id for p in everything]
    assert pages[-1][0] == []


def test_what_a_name_names_is_kept_until_it_is_old(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C3: places change only at `jobpost db upgrade`, so each process keeps what a name
    names (models.reference.places.NAMED), and reads it again once it is older than MAX_AGE: a
    process that outlives an upgrade changing the gazetteer sees the change by then."""
    NAMED.clear()
    hogtown = {"description": "Hogtown, ON"}
    assert _error(resolve(session, hogtown, "l")).code == "unknown_location"
    session.add(LocationName(key="hogtown", location_id=TORONTO))  # as an upgrade would
    session.flush()
    assert _error(resolve(session, hogtown, "l")).code == "unknown_location"
    later = NAMED.clock() + NAMED.MAX_AGE + 1
    monkeypatch.setattr(NAMED, "clock", lambda: later)
    assert _place(resolve(session, hogtown, "l")).id == TORONTO
