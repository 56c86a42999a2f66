"""Work arrangement (C16): where a job is done and whom it takes applicants from

`jobs.workplace_type` is `onSite`, `hybrid` or `remote`; `jobs.applicant_locations` holds the
applicant locations as written (`CA`, or province codes joined by commas), "" for the default
of the type (`models.jobs.workplace`). Every job stored before is on site, with the default:
constant defaults, so PostgreSQL 11+ adds the columns without rewriting the table.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 07:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("workplace_type", sa.String(length=8), server_default="onSite", nullable=False),
    )
    op.add_column(
        "jobs",
        sa.Column(
            "applicant_locations",
            sa.String(length=64),
            server_default=sa.text("''"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    # DROP COLUMN on SQLite too (3.35+), as in 0002: a batch copy would lose AUTOINCREMENT.
    op.drop_column("jobs", "applicant_locations")
    op.drop_column("jobs", "workplace_type")
