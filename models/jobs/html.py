"""Job description HTML: the allow-list check and the nh3 cleaning of C4.

`check_description` reports every rule the HTML breaks, so a write can be answered with a 422;
`clean_description` is what is stored, so what is served is safe even if the check had a gap.
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

import nh3

from models.core.errors import FieldError

ALLOWED_TAGS: frozenset[str] = frozenset(
    {"strong", "b", "em", "i", "br", "p", "div", "ul", "ol", "li", "a"}
)
_A_ATTRIBUTES = frozenset({"href", "target"})
_URL_SCHEMES = frozenset({"http", "https", "mailto"})
# The WHATWG URL parser strips leading/trailing C0 controls and spaces and drops tabs and newlines
# anywhere; without a scheme the URL is relative (rejected too).
_STRIP = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = re.compile("[\t\n\r]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# nh3 (html5ever) can leave <p> in <p>, <a> in <a> or <li> in <li> once it strips a disallowed
# element that scoped them (button, object, table, select, svg...); reparsing such output moves
# them, so one pass is not idempotent. Output of allowed tags only is stable after one more pass.
_MAX_PASSES = 5


def _href_scheme(href: str) -> str | None:
    """The scheme a browser would see in `href`, lower-cased, or None for a relative URL."""
    match = _SCHEME.match(_TAB_NEWLINE.sub("", href.strip(_STRIP)))
    return match.group(1).lower() if match else None


class _Checker(HTMLParser):
    """Collects one FieldError per distinct violation, in document order."""

    def __init__(self, field: str) -> None:
        super().__init__(convert_charrefs=True)
        self.field = field
        self.errors: list[FieldError] = []
        self.open = self.deepest = 0  # elements opened and not yet closed, and the most

    def _add(self, code: str, message: str) -> None:
        error = FieldError(self.field, code, message)
        if error not in self.errors:
            self.errors.append(error)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            self._add("html_tag_not_allowed", f"Tag <{tag}> is not allowed.")
            return
        if tag not in _VOID:
            self.open += 1
            self.deepest = max(self.deepest, self.open)
        allowed = _A_ATTRIBUTES if tag == "a" else frozenset[str]()
        for name, _value in attrs:
            if name not in allowed:
                message = f"Attribute {name} is not allowed on <{tag}>."
                self._add("html_attribute_not_allowed", message)
        if tag != "a":
            return
        hrefs = [value or "" for name, value in attrs if name == "href"]
        if not hrefs or any(not href.strip(_STRIP) for href in hrefs):
            self._add("html_href_required", "Tag <a> requires a non-empty href attribute.")
        elif any(_href_scheme(href) not in _URL_SCHEMES for href in hrefs):
            message = "Attribute href on <a> must be an http, https or mailto URL."
            self._add("html_href_scheme", message)

    def handle_endtag(self, tag: str) -> None:
        """A closing tag of a disallowed element breaks the rule too, opened or not
        (`</span>` alone): nh3 would drop it silently, and the rule is to say so (C4)."""
        if tag not in ALLOWED_TAGS:
            self._add("html_tag_not_allowed", f"Tag <{tag}> is not allowed.")
        elif tag not in _VOID:
            self.open = max(0, self.open - 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """`<br/>`, or `<p/>`, which HTML reads as an opening `<p>`."""
        self.handle_starttag(tag, attrs)

    def handle_decl(self, decl: str) -> None:
        self._add("html_tag_not_allowed", "A doctype declaration is not allowed.")

    def unknown_decl(self, data: str) -> None:
        self._add("html_tag_not_allowed", "A <![...]> section is not allowed.")

    def handle_pi(self, data: str) -> None:
        self._add("html_tag_not_allowed", "A processing instruction is not allowed.")


# What no description needs, and what would cost the parsers time that grows with its square:
# elements open inside each other (nh3 re-reads the stored text at every view of the public
# page, C8), and "<" starting tags that no ">" ends (the standard library's HTMLParser before
# Python 3.11.13 scans the rest of the text for each).
MAX_OPEN = 1000
MAX_UNENDED = 100
_VOID = frozenset({"br"})


def check_description(html: str, field: str = "description") -> list[FieldError]:
    """Every distinct violation of the C4 HTML rules in `html`, reported on `field`."""
    return [] if plainly_allowed(html) else parsed_faults(html, field)


def parsed_faults(html: str, field: str = "description") -> list[FieldError]:
    """`check_description` by the parser alone."""
    if _unended_tags(html) > MAX_UNENDED:
        message = f"More than {MAX_UNENDED} tags are never ended by “>”; write &lt; for a “<”."
        return [FieldError(field, "invalid_format", message)]
    checker = _Checker(field)
    checker.feed(html)
    checker.close()
    if checker.deepest > MAX_OPEN:
        message = f"More than {MAX_OPEN} elements are open inside each other."
        checker.errors.append(FieldError(field, "too_long", message))
    return checker.errors


# HTML as a client's editor writes it: text without "<", and tags of the allow-list with
# lower-case names, attributes on `<a>` alone (each one space before, double-quoted; those of
# an end tag are never read), maybe a "/" before the ">" (`<br/>`, read as `<br>`).
_ATTRIBUTES = r'(?: [a-z]+="[^"<>]*")*'
_NAMES = "|".join(sorted(ALLOWED_TAGS - {"a"}, key=len, reverse=True))
# Possessive (`++`, `*+`): a text that fails to match is not split again and again.
_PLAIN = re.compile(
    rf"(?:[^<]++|<(?:{_NAMES}) ?/?>|</(?:{_NAMES}|a){_ATTRIBUTES} ?/?>|<a{_ATTRIBUTES} ?/?>)*+"
)
_PLAIN_LINK = re.compile(rf"<a({_ATTRIBUTES}) ?/?>")
_PLAIN_ATTRIBUTE = re.compile(r' ([a-z]+)="([^"<>]*)"')


def plainly_allowed(html: str) -> bool:
    """Whether `html` is text and plainly written tags of the allow-list alone, with none of
    the faults `_Checker` reports: most descriptions, checked in a fifth of the parser's
    time. Anything else (a "<" of text, a comment, an upper-case or unknown tag, an attribute
    in single quotes, more tags than could nest too deep) is left to the parser, which then
    reports every fault as it does."""
    if html.count("<") > MAX_OPEN or not _PLAIN.fullmatch(html):
        return False
    return all(_plain_link(attributes) for attributes in _PLAIN_LINK.findall(html))


def _plain_link(attributes: str) -> bool:
    """Attributes of an `<a>`: one href of an allowed scheme, and a target or none."""
    pairs = _PLAIN_ATTRIBUTE.findall(attributes)
    names = [key for key, _value in pairs]
    if len(set(names)) != len(names) or not set(names) <= _A_ATTRIBUTES:
        return False
    href = unescape(dict(pairs).get("href", ""))  # as the parser reads an attribute
    return _href_scheme(href) in _URL_SCHEMES  # None for an empty href too


def _unended_tags(html: str) -> int:
    """How many "<" start a tag (a letter, "/", "!" or "?" next) with no ">" before the next "<"."""
    return sum(
        1
        for piece in html.split("<")[1:]
        if piece[:1].isalpha() or piece[:1] in "/!?"
        if ">" not in piece
    )


def _clean_once(html: str, link_rel: str | None = None) -> str:
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={"a": set(_A_ATTRIBUTES)},
        url_schemes=set(_URL_SCHEMES),
        link_rel=link_rel,
    )


def with_link_rel(stored: str, rel: str) -> str:
    """A stored description for display: the same allow-list, `rel` added to every link."""
    return _clean_once(stored, link_rel=rel)


def clean_description(html: str) -> str:
    """`html` through nh3 with the C4 allow-list, repeated to a fixpoint so it is idempotent."""
    cleaned = _clean_once(html)
    if cleaned == html:  # a fixpoint already: a description as stored, sent back (C4)
        return cleaned
    for _ in range(_MAX_PASSES):
        again = _clean_once(cleaned)
        if again == cleaned:
            break
        cleaned = again
    return cleaned
