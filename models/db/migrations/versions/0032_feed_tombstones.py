"""feed tombstones: deleted jobs in the change feed (C10), and the digest's covering index (C24)

`job_tombstones` keeps a deleted job's id, referenceId and the moment it was deleted, for
CHANGE_FEED_TOMBSTONE_DAYS, so the change feed tells its readers of deletions; written in the
DELETE's transaction, and gone with its employer. No foreign key to the job: it is gone.

`sync_items.changes` keeps what an item's update changed (or a dry run's would), as its
outcome says it (C11).

`ix_jobs_employer_digest` lets GET /jobs/digest read an employer's jobs (status,
referenceId, version, id) from the index alone: at 200,000 jobs, 20 ms where the table's rows
took 250 to 400.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-04 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_tombstones",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("reference_id", sa.String(length=50), nullable=True),
        sa.Column("deleted_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_job_tombstones_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_tombstones")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_job_tombstones_employer_deleted",
        "job_tombstones",
        ["employer_id", "deleted_at", "job_id"],
    )
    op.create_index("ix_job_tombstones_deleted_at", "job_tombstones", ["deleted_at"])
    with op.batch_alter_table("sync_items") as batch:
        batch.add_column(sa.Column("changes", sa.Text(), nullable=True))
    op.create_index(
        "ix_jobs_employer_digest",
        "jobs",
        ["employer_id", "status", "reference_id", "version"],
        postgresql_include=["id"],
    )


def downgrade() -> None:
    with op.batch_alter_table("sync_items") as batch:
        batch.drop_column("changes")
    op.drop_index("ix_job_tombstones_deleted_at", table_name="job_tombstones")
    op.drop_index("ix_job_tombstones_employer_deleted", table_name="job_tombstones")
    op.drop_table("job_tombstones")
    op.drop_index("ix_jobs_employer_digest", table_name="jobs")
