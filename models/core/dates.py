"""The service date (C5): "today" is the calendar date in JOBPOST_TIMEZONE."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

DEFAULT_CLOSE_DAYS = 60  # interface: closeDate defaults to 60 days after publishDate
REFRESH_DAYS = 7  # interface: auto-refresh interval


def utcnow() -> datetime:
    return datetime.now(UTC)


def today_in(tz: ZoneInfo, now: datetime | None = None) -> date:
    """The service date at `now` (default: the current instant)."""
    return (now or utcnow()).astimezone(tz).date()


def on_day(tz: ZoneInfo, day: date, now: datetime) -> datetime:
    """The instant at `now`'s time of day in `tz` on `day`: what the clock would read if the
    service date were `day` (`jobpost tasks run purge --today`, C9)."""
    return datetime.combine(day, now.astimezone(tz).timetz()).astimezone(UTC)


def default_close(publish: date) -> date:
    return publish + timedelta(days=DEFAULT_CLOSE_DAYS)
