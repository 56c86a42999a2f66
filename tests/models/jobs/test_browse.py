"""The public filters (C17): one frozen value read from and written to a query string, and
the search over the open jobs on both databases (the `engine` fixture, via `sessions`)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from models.db.entities import Job
from models.jobs import browse
from models.jobs.feeds import ANNUAL, Filters
from tests.factories import create_job

TODAY = date(2026, 3, 10)


def test_filters_round_trip_through_a_query_string() -> None:
    filters = Filters("baker", 12, "ON", 6167865, 1, "remote", 60000, 7)
    pairs = filters.to_query()
    assert pairs == [
        ("q", "baker"),
        ("category", "12"),
        ("province", "ON"),
        ("place", "6167865"),
        ("positionType", "1"),
        ("workplaceType", "remote"),
        ("minPay", "60000"),
        ("days", "7"),
    ]
    assert Filters.from_query(dict(pairs)) == (filters, [])
    assert Filters.from_query({"q": "", "days": None}) == (Filters(), [])
    assert Filters().to_query() == []


@pytest.mark.parametrize(
    ("values", "entry"),
    [
        ({"q": "a\x00b"}, ("q", "invalid_format")),
        ({"category": "x"}, ("category", "invalid_type")),
        ({"category": "31"}, ("category", "unknown_category")),
        ({"province": "on"}, ("province", "out_of_range")),
        ({"place": "-1"}, ("place", "invalid_type")),
        ({"positionType": "6"}, ("positionType", "unknown_position_type")),
        ({"workplaceType": "Remote"}, ("workplaceType", "out_of_range")),
        ({"minPay": "0"}, ("minPay", "out_of_range")),
        ({"minPay": "10000001"}, ("minPay", "out_of_range")),
        ({"days": "366"}, ("days", "out_of_range")),
    ],
)
def test_a_value_no_search_means_is_an_entry(values: dict[str, str], entry: Any) -> None:
    filters, errors = Filters.from_query(values)
    assert [(e.field, e.code) for e in errors] == [entry]
    assert filters == Filters()


def test_the_annual_factors() -> None:
    assert ANNUAL == {1: 1, 2: 12, 3: 52, 4: 260, 5: 2080}


def test_search_pages_and_filters_by_pay_on_either_database(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    ids = [create_job(api, employer, status="active", title=f"Cook {n}")["id"] for n in range(3)]
    with sessions() as s:  # 25 an hour (52,000), 5,000 a month (60,000), and no pay
        s.execute(
            update(Job)
            .where(Job.id == ids[0])
            .values(salary_amount=Decimal(25), salary_max=None, salary_period_id=5)
        )
        s.execute(
            update(Job)
            .where(Job.id == ids[1])
            .values(salary_amount=Decimal(4000), salary_max=Decimal(5000), salary_period_id=2)
        )
        s.execute(
            update(Job)
            .where(Job.id == ids[2])
            .values(salary_amount=None, salary_max=None, salary_period_id=None)
        )
        s.commit()
        connection = s.connection()

        def found(filters: Filters, **more: Any) -> list[int]:
            return [j.id for j in browse.search(connection, filters, TODAY, **more).jobs]

        assert found(Filters(min_pay=52000)) == [ids[1], ids[0]]
        assert found(Filters(min_pay=52001)) == [ids[1]]
        assert found(Filters(min_pay=60001)) == []
        first = browse.search(connection, Filters(), TODAY, page_size=2)
        assert [j.id for j in first.jobs] == [ids[2], ids[1]] and first.more
        last = browse.search(connection, Filters(), TODAY, page=2, page_size=2)
        assert [j.id for j in last.jobs] == [ids[0]] and not last.more
        assert found(Filters(days=1)) == [ids[2], ids[1], ids[0]]
        s.execute(update(Job).where(Job.id == ids[0]).values(publish_date=TODAY - timedelta(1)))
        assert found(Filters(days=1)) == [ids[2], ids[1]]
        assert found(Filters(days=2), sort=browse.CLOSING)[-1] == ids[2]


def test_days_needs_today() -> None:
    with pytest.raises(ValueError):
        Filters(days=1).conditions()
