"""Task heartbeats (C9): the last success of each periodic task

One row a periodic task (`jobpost.sweep`, …), written each time it succeeds and read by
/metrics as `jobpost_periodic_task_last_success_timestamp_seconds{task}`: a beat that stops
shows as a heartbeat that stops. A new table: nothing else changes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_heartbeats",
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("last_success_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("task"),
    )


def downgrade() -> None:
    op.drop_table("task_heartbeats")
