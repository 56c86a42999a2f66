"""Text in the XML the sitemaps and feeds write (C15): escaped as character data or inside
CDATA, and without the characters XML 1.0 cannot hold at all (a stored title may hold a
control character, which no escape makes legal)."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape as _escape

# What XML 1.0 allows (section 2.2): tab, newline, carriage return, and U+0020 up, less the
# surrogates and U+FFFE and U+FFFF.
_ILLEGAL = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


def legal(text: str) -> str:
    return _ILLEGAL.sub("", text)


def text(value: str) -> str:
    """`value` as character data: `&`, `<` and `>` escaped."""
    return _escape(legal(value))


def attribute(value: str) -> str:
    """`value` inside a double-quoted attribute."""
    return _escape(legal(value), _ATTRIBUTE)


def cdata(value: str) -> str:
    """`value` in a CDATA section; a `]]>` in it is split across two sections."""
    return "<![CDATA[" + legal(value).replace("]]>", "]]]]><![CDATA[>") + "]]>"


def element(name: str, value: str) -> str:
    return f"<{name}>{text(value)}</{name}>"
