"""Where a job is done and whom it takes applicants from (C16): its stored form and meaning.

`applicant_locations` is stored as written, its codes joined by commas, with "" for the
default of the job's type: the provinces of its locations on site or hybrid, all of Canada
remote. Keeping the default as "" (and a remote job's `["CA"]` as that default) gives each
job one stored form, so a GET result sent back is not a write (C10).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from models.core.i18n import N_
from models.reference.lists import PROVINCES

ON_SITE, HYBRID, REMOTE = "onSite", "hybrid", "remote"
TYPES = (ON_SITE, HYBRID, REMOTE)
# Each type as the pages and the alerts say it, translated where it is shown.
WORDS = {ON_SITE: N_("On site"), HYBRID: N_("Hybrid"), REMOTE: N_("Remote")}
DEFAULT_TYPE = ON_SITE
CANADA = "CA"
PROVINCE_CODES = tuple(code for _id, code, _name, _kind in PROVINCES)
PROVINCE_NAMES = {code: name for _id, code, name, _kind in PROVINCES}
CODES = (CANADA, *PROVINCE_CODES)


def stored(workplace_type: str, codes: Sequence[str]) -> str:
    """The stored form of a valid list for a job of this type."""
    if workplace_type == ON_SITE or list(codes) == _default(workplace_type):
        return ""
    return ",".join(codes)


def listed(workplace_type: str, applicant_locations: str) -> list[str]:
    """The read shape's `applicantLocations`: as written, or `["CA"]` for a remote job's
    default; `[]` for the default of the others (the provinces of the job's locations)."""
    return applicant_locations.split(",") if applicant_locations else _default(workplace_type)


def _default(workplace_type: str) -> list[str]:
    return [CANADA] if workplace_type == REMOTE else []


def provinces(workplace_type: str, applicant_locations: str, located: Iterable[str]) -> set[str]:
    """The provinces whose rules a job follows (C13, C16): those of its locations (`located`),
    a hybrid job's applicant provinces besides, and a remote job's applicant provinces alone;
    `CA` is every province."""
    where = set(located)
    if workplace_type == ON_SITE:
        return where
    codes = set(listed(workplace_type, applicant_locations))
    taken = set(PROVINCE_CODES) if CANADA in codes else codes
    return taken | where if workplace_type == HYBRID else taken
