"""report_mails (C13): the operator's email of each fraud report, the outbox's second kind

One row per report written while REPORTS_EMAIL is set, in the report's transaction, with the
columns of `outbox` (C8): the same claims, leases, retries and sweep deliver it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 06:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "report_mails",
        sa.Column("report_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("retry_from", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["report_id"], ["job_reports.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("report_id"),
    )
    op.create_index("ix_report_mails_status_next", "report_mails", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_report_mails_status_next", table_name="report_mails")
    op.drop_table("report_mails")
