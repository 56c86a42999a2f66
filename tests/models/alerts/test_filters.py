"""An alert's search in words (C19), as its pages and emails say it: every filter of the
search page (C17) in English and French, not as a name and a value."""

from __future__ import annotations

import pytest

from models.alerts import filters as alert_filters
from models.core.i18n import language
from models.jobs.feeds import Filters
from tests.factories import EVERY_FILTER


@pytest.mark.parametrize(
    ("search", "english", "french"),
    [
        (Filters(), "All jobs", "Toutes les offres"),
        (Filters(q="line cook"), "“line cook”", "«\u00a0line cook\u00a0»"),
        (Filters(category=12), "Hospitality & Tourism", "Hôtellerie et tourisme"),
        (Filters(province="QC"), "Quebec", "Québec"),
        (Filters(position_type=1), "Full Time", "Temps plein"),
        (Filters(workplace_type="remote"), "Remote", "Télétravail"),
        (Filters(workplace_type="onSite"), "On site", "Sur place"),
        (
            Filters(min_pay=50000),
            "at least $50,000 a year",
            "au moins 50\u00a0000\u00a0$ par année",
        ),
        (Filters(days=7), "posted in the last 7 days", "publiées depuis 7 jours"),
        (Filters(days=1), "posted in the last 1 day", "publiées depuis 1 jour"),
        (Filters(place=6167865), "location no. 6167865", "lieu nº 6167865"),
    ],
)
def test_each_filter_in_words(search: Filters, english: str, french: str) -> None:
    assert alert_filters.describe(search, language("en")) == english
    assert alert_filters.describe(search, language("fr")) == french


def test_the_filters_in_the_search_pages_order_and_the_place_by_its_name() -> None:
    assert alert_filters.describe(EVERY_FILTER, language("en"), "Toronto, ON") == (
        "“café” · Hospitality & Tourism · Ontario · Toronto, ON · Full Time · Remote"
        " · at least $50,000 a year · posted in the last 7 days"
    )
    assert alert_filters.describe(EVERY_FILTER, language("fr"), "Toronto, ON") == (
        "«\u00a0café\u00a0» · Hôtellerie et tourisme · Ontario · Toronto, ON · Temps plein"
        " · Télétravail · au moins 50\u00a0000\u00a0$ par année · publiées depuis 7 jours"
    )
