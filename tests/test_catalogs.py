"""C13: every string shown has French, the catalog holds exactly the strings of the code and
templates, the compiled catalog matches its source, and the French follows OQLF typography."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "models" / "core" / "locale"
PO = LOCALE / "fr" / "LC_MESSAGES" / "messages.po"
MO = LOCALE / "fr" / "LC_MESSAGES" / "messages.mo"
FIX = "run `make catalogs` and translate what it adds"


def _po() -> Catalog:
    with PO.open("rb") as f:
        return read_po(f, locale="fr")


def _entries(catalog: Catalog) -> list[Message]:
    return [m for m in catalog if m.id]


def _strings(message: Message) -> list[str]:
    value: Any = message.string
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value or "")]


def _ids(message: Message) -> list[str]:
    value: Any = message.id
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _key(value: object) -> object:
    return tuple(value) if isinstance(value, list | tuple) else value


def extracted() -> set[str | tuple[str, ...]]:
    """The msgids Babel extracts from the sources today, as `make catalogs` does."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)  # type: ignore[no-untyped-call]
    found: set[str | tuple[str, ...]] = set()
    for folder in ("api", "models", "workers"):
        for _file, _line, message, _comments, _context in extract_from_dir(
            ROOT / folder, method_map, options_map
        ):
            found.add(message if isinstance(message, str) else tuple(message))
    return found


def test_the_catalog_holds_exactly_the_strings_of_the_sources() -> None:
    in_po = {m.id for m in _entries(_po())}
    now = extracted()
    assert not now - in_po, f"strings with no entry in the French catalog: {FIX}"
    assert not in_po - now, f"entries no source uses any more: {FIX}"


def test_every_string_has_a_french_translation() -> None:
    catalog = _po()
    missing = [m.id for m in _entries(catalog) if m.fuzzy or not all(_strings(m))]
    assert not missing, f"no French (or fuzzy) for {missing}"
    assert catalog.num_plurals >= 2


def test_the_compiled_catalog_matches_its_source() -> None:
    with MO.open("rb") as f:
        compiled = {_key(m.id): _key(m.string) for m in read_mo(f) if m.id}
    source = {_key(m.id): _key(m.string) for m in _entries(_po())}
    assert compiled == source, (
        "models/core/locale/fr/LC_MESSAGES/messages.mo is stale: `make catalogs`"
    )


@pytest.mark.parametrize("message", _entries(_po()), ids=lambda m: str(m.id)[:40])
def test_each_translation_keeps_its_placeholders_and_markup(message: Message) -> None:
    placeholders = re.compile(r"%\(\w+\)s|</?\w+>")
    wanted = sorted(placeholders.findall(_ids(message)[-1]))
    for text in _strings(message):
        assert sorted(placeholders.findall(text)) == wanted, text


# OQLF: a no-break space (U+00A0) before the colon and inside guillemets, a narrow no-break
# space (U+202F, or U+00A0) before ; ! ?; the typographic apostrophe; no space before a comma
# or a period.
TYPOGRAPHY = [
    (re.compile(r"[^\u00a0]:(?!\d)"), "a colon needs a no-break space before it"),
    (re.compile(r"[^\u00a0\u202f][;!?]"), "; ! ? need a (narrow) no-break space before them"),
    (re.compile(r"«[^\u00a0]|[^\u00a0]»"), "guillemets hold a no-break space inside"),
    (re.compile(r"'"), "the apostrophe is ’"),
    (re.compile(r"\"|“|”"), "quotes are « guillemets »"),
    (re.compile(r"\s[,.]"), "no space before a comma or a period"),
    (re.compile(r"\d \d|\d [$%]|\d (Mo|Ko|Go)\b"), "no ordinary space inside a number or unit"),
]


@pytest.mark.parametrize("message", _entries(_po()), ids=lambda m: str(m.id)[:40])
def test_the_french_follows_oqlf_typography(message: Message) -> None:
    for text in _strings(message):
        plain = re.sub(r"%\(\w+\)s|<[^>]+>|\w+@\w+(\.\w+)+", "X", text)
        for pattern, rule in TYPOGRAPHY:
            assert not pattern.search(plain), f"{text!r}: {rule}"


def test_the_typography_check_catches_each_fault() -> None:
    """The rules above are not vacuous: each refuses an example of its fault."""
    faults = ["Nom :", "Merci !", "Courriel: x", "« x »", "l'offre", '"x"', "x ,", "5 Mo"]
    for text in faults:
        assert any(p.search(text) for p, _rule in TYPOGRAPHY), text
