"""The periodic tasks (C9), as plain data naming tasks by their explicit names.

Times are in JOBPOST_TIMEZONE: the Celery app sets its timezone from it. The sweep is an
interval of real time, not a crontab: a crontab reads the clock of that zone, and every
minute of the hour a fall back repeats is one it has run already, so it would stay silent
for that hour (the daily and hourly times run once at the time the clock shows, as cron).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery.schedules import crontab

MAINTENANCE = {"queue": "maintenance"}

SCHEDULE: dict[str, dict[str, Any]] = {
    "expire-closed-jobs": {
        "task": "jobpost.expire",
        "schedule": crontab(minute="5"),
        "options": MAINTENANCE,
    },
    "refresh-auto-refresh-jobs": {
        "task": "jobpost.refresh",
        "schedule": crontab(minute="15", hour="0"),
        "options": MAINTENANCE,
    },
    "sweep-outbox": {
        "task": "jobpost.sweep",
        "schedule": timedelta(minutes=1),
        "options": MAINTENANCE,
    },
    "notify-search-engines": {  # C18: does nothing while no channel is configured
        "task": "jobpost.notify_search_engines",
        "schedule": timedelta(minutes=1),
        "options": MAINTENANCE,
    },
    "alert-digests": {  # C19: the digests of the job alerts due (daily and weekly alike)
        "task": "jobpost.digests",
        "schedule": crontab(minute="0", hour="7"),
        "options": MAINTENANCE,
    },
    "purge-old-applications": {
        "task": "jobpost.purge",
        "schedule": crontab(minute="0", hour="3"),
        "options": MAINTENANCE,
    },
}
