"""Indexes for the change feeds: jobs by (employer, updated_at, id), applications of a job
by (job, received_at, id) (C10)

`GET /jobs?sort=updatedAt` walks an employer's jobs in the order of (updated_at, id) from a
position; the index makes that a range read that stops after the page, whoever the employer.
The employer's applications feed walks the existing (employer, received_at DESC, id DESC)
index backwards; the one of a job (`/jobs/{id}/applications`) gets its own, which also serves
the job's newest-first list and what `ix_applications_job` served (the foreign key's ON DELETE
SET NULL), so that one is dropped.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 03:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.create_index("ix_jobs_employer_updated", "jobs", ["employer_id", "updated_at", "id"])
    op.create_index("ix_applications_job_received", "applications", ["job_id", "received_at", "id"])
    op.drop_index("ix_applications_job", table_name="applications")


def downgrade() -> None:
    op.create_index("ix_applications_job", "applications", ["job_id"])
    op.drop_index("ix_applications_job_received", table_name="applications")
    op.drop_index("ix_jobs_employer_updated", table_name="jobs")
