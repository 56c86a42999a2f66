"""The last success of each periodic task (C9): a row a task, written when it succeeds, read
by a /metrics scrape (`jobpost_periodic_task_last_success_timestamp_seconds{task}`), so a beat
that has gone silent shows as a heartbeat that stops."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from models.db.entities import TaskHeartbeat

_TABLE: Any = TaskHeartbeat.__table__


def beat(session: Session, task: str, *, now: datetime) -> None:
    """Record that `task` (its Celery name, `jobpost.sweep`) succeeded at `now`; the later of
    two runs that overlap wins."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = insert(_TABLE).values(task=task, last_success_at=now)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[_TABLE.c.task],
            set_={"last_success_at": statement.excluded.last_success_at},
            where=_TABLE.c.last_success_at < statement.excluded.last_success_at,
        )
    )


def last_successes(session: Session) -> dict[str, datetime]:
    """Each task's last success, by task name (the tasks that never succeeded are absent)."""
    rows = session.execute(select(TaskHeartbeat.task, TaskHeartbeat.last_success_at))
    return {task: at for task, at in rows}
