"""`jobpost notifications` (C18): what waits to be told to each search engine."""

from __future__ import annotations

import argparse

from models.core.dates import utcnow
from models.db.unit_of_work import session_scope
from models.notifications import channels
from models.notifications import queue as notifications
from workers.cli.command import Command, out


def notifications_list(args: argparse.Namespace, command: Command) -> int:
    """Each channel: on or off, its notifications by status, and the first waiting ones."""
    on = channels.of_settings(command.settings).on
    settings = command.settings
    with session_scope(command.sessions) as s:
        counts = notifications.counts(s)
        first = {c: notifications.pending(s, c, limit=args.limit) for c in channels.CHANNELS}
        used = notifications.used_today(s, channels.GOOGLE, now=utcnow())
    data = {
        channel: {
            "configured": channel in on,
            "counts": counts[channel],
            "pending": [
                {
                    "kind": row.kind,
                    "url": row.url,
                    "attempts": row.attempts,
                    "nextAttemptAt": row.next_attempt_at.isoformat(),
                    "lastStatusCode": row.last_status_code,
                }
                for row in first[channel]
            ],
        }
        for channel in channels.CHANNELS
    }
    data[channels.GOOGLE]["quota"] = {
        "perDay": settings.google_indexing_daily_quota,
        "usedToday": used,
    }
    lines = []
    for channel in channels.CHANNELS:
        state = "on" if channel in on else "off (not configured)"
        figures = ", ".join(f"{n} {status}" for status, n in counts[channel].items())
        lines.append(f"{channel}: {state}; {figures}")
        if channel == channels.GOOGLE:
            lines.append(
                f"  quota: {used} of {settings.google_indexing_daily_quota} used today (UTC)"
            )
        for row in first[channel]:
            lines.append(
                f"  {row.kind:<11} {row.url}  attempts {row.attempts}, next "
                f"{row.next_attempt_at:%Y-%m-%d %H:%M:%S}Z"
                + (f", last answer {row.last_status_code}" if row.last_status_code else "")
            )
    out(args, data, "\n".join(lines))
    return 0
