"""C16's stored form and meaning, alone: the default of each type, one stored form per job,
and the provinces whose rules a job follows."""

from __future__ import annotations

import pytest

from models.jobs import workplace
from models.jobs.workplace import HYBRID, ON_SITE, REMOTE

EVERY = set(workplace.PROVINCE_CODES)


@pytest.mark.parametrize(
    ("kind", "codes", "stored"),
    [
        (ON_SITE, [], ""),
        (HYBRID, [], ""),
        (HYBRID, ["ON", "QC"], "ON,QC"),
        (HYBRID, ["CA"], "CA"),
        (REMOTE, [], ""),
        (REMOTE, ["CA"], ""),  # the default, stored as such
        (REMOTE, ["QC", "ON"], "QC,ON"),  # in the order written
    ],
)
def test_each_list_has_one_stored_form_that_reads_back(
    kind: str, codes: list[str], stored: str
) -> None:
    assert workplace.stored(kind, codes) == stored
    expected = codes or (["CA"] if kind == REMOTE else [])
    assert workplace.listed(kind, stored) == expected


@pytest.mark.parametrize(
    ("kind", "stored", "located", "expected"),
    [
        (ON_SITE, "", {"ON"}, {"ON"}),
        (HYBRID, "", {"ON"}, {"ON"}),
        (HYBRID, "QC", {"ON"}, {"ON", "QC"}),
        (HYBRID, "CA", {"ON"}, EVERY),
        (REMOTE, "", {"ON"}, EVERY),  # the default: all of Canada
        (REMOTE, "BC", {"ON"}, {"BC"}),  # its locations do not count
        (REMOTE, "ON,PE", set(), {"ON", "PE"}),
    ],
)
def test_the_provinces_a_job_follows(
    kind: str, stored: str, located: set[str], expected: set[str]
) -> None:
    assert workplace.provinces(kind, stored, located) == expected
