"""The public search (C17): the open jobs in each of its orders

Two partial indexes over the open jobs (active, not taken down), one per sort of the search
page: newest (`publish_date` then `id`, both descending) and closing soonest (`close_date`
then `id`). A page walks one in order and tests each job's filters, so a common filter stops
after a page's worth of jobs instead of sorting every match.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 16:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN_PG = sa.text("status = 'active' AND taken_down = false")
OPEN_SQLITE = sa.text("status = 'active' AND taken_down = 0")


def upgrade() -> None:
    op.create_index(
        "ix_jobs_open_published",
        "jobs",
        [sa.text("publish_date DESC"), sa.text("id DESC")],
        postgresql_where=OPEN_PG,
        sqlite_where=OPEN_SQLITE,
    )
    op.create_index(
        "ix_jobs_open_closing",
        "jobs",
        ["close_date", "id"],
        postgresql_where=OPEN_PG,
        sqlite_where=OPEN_SQLITE,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_open_closing", table_name="jobs")
    op.drop_index("ix_jobs_open_published", table_name="jobs")
