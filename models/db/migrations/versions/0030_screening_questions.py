"""Screening questions (C21): a job's questions, an application's answers, the employer's choice

`jobs.questions` holds a job's questions in read shape as JSON text (null: none);
`applications.answers` the answers with their questions' wording, and
`applications.knocked_out_by` the id of the question whose answer knocked it out;
`employers.email_knocked_out` whether such an application is emailed (the default) or only
stored. Nullable columns and a constant default: PostgreSQL 11+ adds them without rewriting a
table, and SQLite adds them in place (no batch copy, so the jobs' triggers stay).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-04 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("questions", sa.Text(), nullable=True))
    op.add_column("applications", sa.Column("answers", sa.Text(), nullable=True))
    op.add_column("applications", sa.Column("knocked_out_by", sa.String(length=40), nullable=True))
    op.add_column(
        "employers",
        sa.Column("email_knocked_out", sa.Boolean(), server_default=sa.true(), nullable=False),
    )


def downgrade() -> None:
    # DROP COLUMN on SQLite too (3.35+), as in 0019: a batch copy would lose AUTOINCREMENT.
    op.drop_column("employers", "email_knocked_out")
    op.drop_column("applications", "knocked_out_by")
    op.drop_column("applications", "answers")
    op.drop_column("jobs", "questions")
