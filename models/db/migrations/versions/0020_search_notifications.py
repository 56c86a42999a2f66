"""Search-engine notifications (C18): the URLs waiting to be told to IndexNow and Google's
Indexing API, one row a URL and a channel, leased like the outbox (models.db.leases); and
the requests made to each channel a day, for its quota.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 15:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "search_notifications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=10), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_notifications")),
        sqlite_autoincrement=True,
    )
    # The sender's due rows by channel; a write's coalescing by URL; the quota and purge.
    op.create_index(
        "ix_search_notifications_due",
        "search_notifications",
        ["channel", "status", "next_attempt_at"],
    )
    op.create_index("ix_search_notifications_url", "search_notifications", ["channel", "url"])
    op.create_index("ix_search_notifications_finished", "search_notifications", ["finished_at"])
    op.create_table(
        "search_notification_days",
        sa.Column("channel", sa.String(length=10), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("channel", "day", name=op.f("pk_search_notification_days")),
    )


def downgrade() -> None:
    op.drop_table("search_notification_days")
    op.drop_index("ix_search_notifications_finished", table_name="search_notifications")
    op.drop_index("ix_search_notifications_url", table_name="search_notifications")
    op.drop_index("ix_search_notifications_due", table_name="search_notifications")
    op.drop_table("search_notifications")
