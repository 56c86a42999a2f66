"""sync_runs and sync_items: runs of the employer's whole set of jobs (C11)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sync_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("allow_empty", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("jobs_before", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("processed", sa.Integer(), nullable=False),
        sa.Column("created", sa.Integer(), nullable=False),
        sa.Column("updated", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("archived", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("enqueued_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("claim", sa.Integer(), nullable=False),
        sa.Column("released", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_sync_runs_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sync_runs")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_sync_runs_employer_id", "sync_runs", ["employer_id", sa.text("id DESC")], unique=False
    )
    op.create_index("ix_sync_runs_status", "sync_runs", ["status"], unique=False)
    op.create_index("ix_sync_runs_finished_at", "sync_runs", ["finished_at"], unique=False)
    op.create_table(
        "sync_items",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("reference_id", sa.String(length=50), nullable=False),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=10), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("errors", sa.Text(), nullable=True),
        sa.Column("warnings", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["sync_runs.id"],
            name=op.f("fk_sync_items_run_id_sync_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "position", name=op.f("pk_sync_items")),
    )
    op.create_index(
        "uq_sync_items_run_reference", "sync_items", ["run_id", "reference_id"], unique=True
    )
    op.create_index(
        "ix_sync_items_run_outcome", "sync_items", ["run_id", "outcome", "position"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_sync_items_run_outcome", table_name="sync_items")
    op.drop_index("uq_sync_items_run_reference", table_name="sync_items")
    op.drop_table("sync_items")
    op.drop_index("ix_sync_runs_finished_at", table_name="sync_runs")
    op.drop_index("ix_sync_runs_status", table_name="sync_runs")
    op.drop_index("ix_sync_runs_employer_id", table_name="sync_runs")
    op.drop_table("sync_runs")
