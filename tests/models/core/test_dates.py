"""The one timestamp format (C10, C12): every answer, webhook body and log line writes
instants with models.core.dates.timestamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from models.core.dates import timestamp


def test_an_instant_is_utc_with_milliseconds_truncated() -> None:
    moment = datetime(2026, 11, 25, 15, 5, 9, 962999, tzinfo=UTC)
    assert timestamp(moment) == "2026-11-25T15:05:09.962Z"
    assert timestamp(moment.replace(microsecond=0)) == "2026-11-25T15:05:09.000Z"


def test_an_offset_is_turned_into_utc_and_a_naive_datetime_is_utc() -> None:
    toronto = timezone(timedelta(hours=-5))
    assert timestamp(datetime(2026, 11, 25, 10, 5, 9, 1000, tzinfo=toronto)) == (
        "2026-11-25T15:05:09.001Z"
    )
    assert timestamp(datetime(2026, 11, 25, 15, 5, 9)) == "2026-11-25T15:05:09.000Z"


def test_none_stays_none() -> None:
    assert timestamp(None) is None
