"""Compliance (C13): the employer's settings and the job's two posting statements

`employers.compliance` is `off`, `warn` or `enforce`; `employers.ontario25_plus` says whether
Ontario's rules for employers with 25 or more employees there apply. `jobs.ai_screening` and
`jobs.existing_vacancy` are the job's AI and vacancy statements, null when not stated.

Revision ID: 0013
Revises: 0008
Create Date: 2026-11-28 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0008"
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


def downgrade() -> None:
    # DROP COLUMN on SQLite too (3.35+), as in 0002: a batch copy would lose AUTOINCREMENT.
    op.drop_column("jobs", "existing_vacancy")
    op.drop_column("jobs", "ai_screening")
    op.drop_column("employers", "ontario25_plus")
    op.drop_column("employers", "compliance")
