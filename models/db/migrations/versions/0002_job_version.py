"""jobs.version: a counter every write to a job raises (the API's cache validator)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: PostgreSQL 11+ adds the column without rewriting the table.
    op.add_column("jobs", sa.Column("version", sa.Integer(), server_default="1", nullable=False))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN on SQLite too (3.35+): a batch copy of the table would lose its
    # AUTOINCREMENT (a deleted job's id named a new one) and its index's DESC columns.
    op.drop_column("jobs", "version")
