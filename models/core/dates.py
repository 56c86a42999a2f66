"""The service date (C5): "today" is the calendar date in JOBPOST_TIMEZONE."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import overload
from zoneinfo import ZoneInfo

DEFAULT_CLOSE_DAYS = 60  # interface: closeDate defaults to 60 days after publishDate
REFRESH_DAYS = 7  # interface: auto-refresh interval


def utcnow() -> datetime:
    return datetime.now(UTC)


@overload
def timestamp(moment: datetime) -> str: ...
@overload
def timestamp(moment: None) -> None: ...
@overload
def timestamp(moment: datetime | None) -> str | None: ...
def timestamp(moment: datetime | None) -> str | None:
    """Every instant the service writes (C10, C12), in models because webhook bodies are
    rendered there: RFC 3339 in UTC, `Z`, milliseconds truncated so that an `updatedSince`
    copied from an answer still finds what it was copied from. A naive datetime is UTC."""
    if moment is None:
        return None
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def today_in(tz: ZoneInfo, now: datetime | None = None) -> date:
    """The service date at `now` (default: the current instant)."""
    return (now or utcnow()).astimezone(tz).date()


def on_day(tz: ZoneInfo, day: date, now: datetime) -> datetime:
    """The instant at `now`'s time of day in `tz` on `day`: what the clock would read if the
    service date were `day` (`jobpost tasks run purge --today`, C9)."""
    return datetime.combine(day, now.astimezone(tz).timetz()).astimezone(UTC)


def default_close(publish: date) -> date:
    return publish + timedelta(days=DEFAULT_CLOSE_DAYS)
