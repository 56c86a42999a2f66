"""Which language a public page speaks (C13): `?lang=`, then Accept-Language, then the job's.

Nothing here fails: a `lang` other than `en` or `fr` is ignored, and so is an Accept-Language
header that does not parse (RFC 9110 §12.5.4), so a page always renders.
"""

from __future__ import annotations

import re

import falcon

from models.core.i18n import DEFAULT, LANGUAGES

# One element: a language range (`fr`, `fr-CA`, `*`), maybe a weight from 0 to 1 with at most
# three decimals. Any other parameter, or a weight out of range, makes the header malformed.
_RANGE = re.compile(
    r"\s*(?P<tag>\*|[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*)"
    r"(?:\s*;\s*[qQ]=(?P<q>0(?:\.\d{0,3})?|1(?:\.0{0,3})?))?\s*"
)


def from_query(req: falcon.Request) -> str | None:
    """`?lang=en` or `?lang=fr`; anything else (or several values) is no choice."""
    value = req.params.get("lang")
    return value if isinstance(value, str) and value in LANGUAGES else None


def from_header(header: str | None) -> str | None:
    """The language of LANGUAGES the header prefers most, by q-value (ties: the one listed
    first). `*` names no language, but one refused with `q=0` leaves the other. None when
    the header is absent or malformed, or prefers neither."""
    if not header or not header.strip():
        return None
    weights: dict[str, float] = {}
    for position, part in enumerate(header.split(",")):
        if not part.strip():
            continue  # RFC 9110 allows empty list elements
        match = _RANGE.fullmatch(part)
        if match is None:
            return None
        q = float(match["q"]) if match["q"] is not None else 1.0
        primary = match["tag"].lower().split("-", 1)[0]
        if primary in LANGUAGES:
            # Its best range counts (`fr;q=0.5, fr-CA`); a later position loses a tie.
            weight = q - position * 1e-6 if q > 0 else 0.0
            weights[primary] = max(weights.get(primary, 0.0), weight)
    wanted = {code: q for code, q in weights.items() if q > 0}
    if wanted:
        return max(wanted, key=wanted.__getitem__)
    left = [code for code in LANGUAGES if code not in weights]
    return left[0] if len(weights) == 1 and len(left) == 1 else None


def choose(req: falcon.Request, job_language: str | None = None) -> str:
    """C13's order: `?lang=`, Accept-Language, the job's language, English."""
    return (
        from_query(req)
        or from_header(req.get_header("Accept-Language"))
        or (job_language if job_language in LANGUAGES else None)
        or DEFAULT
    )
