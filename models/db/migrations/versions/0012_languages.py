"""English and French (C13): jobs.language and their translation, employers.language

A job's `language` names the language of its title and description; `translation_title` and
`translation_description` hold both in the other language, or are both null. An employer's
`language` is that of the emails it receives.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Constant defaults: PostgreSQL 11+ adds the columns without rewriting the tables.
    op.add_column(
        "jobs", sa.Column("language", sa.String(length=2), server_default="en", nullable=False)
    )
    op.add_column("jobs", sa.Column("translation_title", sa.String(length=256), nullable=True))
    op.add_column("jobs", sa.Column("translation_description", sa.Text(), nullable=True))
    op.add_column(
        "employers",
        sa.Column("language", sa.String(length=2), server_default="en", nullable=False),
    )


def downgrade() -> None:
    # DROP COLUMN on SQLite too (3.35+), as in 0002: a batch copy would lose AUTOINCREMENT.
    op.drop_column("employers", "language")
    op.drop_column("jobs", "translation_description")
    op.drop_column("jobs", "translation_title")
    op.drop_column("jobs", "language")
