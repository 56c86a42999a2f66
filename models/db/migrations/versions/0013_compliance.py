"""Compliance (C13): the employer's settings and the job's two posting statements

`employers.compliance` is `off`, `warn` or `enforce`; `employers.ontario25_plus` says whether
Ontario's rules for employers with 25 or more employees there apply. `jobs.ai_screening` and
`jobs.existing_vacancy` are the job's AI and vacancy statements, null when not stated.
`jobs.taken_down` marks a job the operator took down after a fraud report; `job_reports`
holds the reports.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Constant defaults: PostgreSQL 11+ adds the columns without rewriting the tables.
    op.add_column(
        "employers",
        sa.Column("compliance", sa.String(length=8), server_default="warn", nullable=False),
    )
    op.add_column(
        "employers",
        sa.Column("ontario25_plus", sa.Boolean(), server_default=sa.true(), nullable=False),
    )
    op.add_column("jobs", sa.Column("ai_screening", sa.Boolean(), nullable=True))
    op.add_column("jobs", sa.Column("existing_vacancy", sa.Boolean(), nullable=True))
    op.add_column(
        "jobs", sa.Column("taken_down", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_table(
        "job_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_job_reports_status", "job_reports", ["status", "id"])
    op.create_index("ix_job_reports_email", "job_reports", ["email"])


def downgrade() -> None:
    # DROP COLUMN on SQLite too (3.35+), as in 0002: a batch copy would lose AUTOINCREMENT.
    op.drop_index("ix_job_reports_email", table_name="job_reports")
    op.drop_index("ix_job_reports_status", table_name="job_reports")
    op.drop_table("job_reports")
    op.drop_column("jobs", "taken_down")
    op.drop_column("jobs", "existing_vacancy")
    op.drop_column("jobs", "ai_screening")
    op.drop_column("employers", "ontario25_plus")
    op.drop_column("employers", "compliance")
