"""The periodic tasks (C9), as plain data naming tasks by their explicit names.

Times are in JOBPOST_TIMEZONE: the Celery app sets its timezone from it.
"""

from __future__ import annotations

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
        "schedule": crontab(),  # every minute
        "options": MAINTENANCE,
    },
    "purge-old-applications": {
        "task": "jobpost.purge",
        "schedule": crontab(minute="0", hour="3"),
        "options": MAINTENANCE,
    },
}
