"""The employer's publish-date index of jobs also holds status and search text (C6)

A search whose words are common finds its page by walking the employer's jobs newest first
and testing each (models.jobs.writes), about a hundred jobs for each match when one title in a
hundred holds the words. With status and search text in the index, the walk reads the index
alone and no table row; so does a page of one status. PostgreSQL only (INCLUDE): SQLite's
index is left as it is.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 20:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_jobs_employer_published"
COLUMNS = "jobs (employer_id, publish_date DESC, id DESC)"


def _replace(include: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(f"CREATE INDEX {NAME}_new ON {COLUMNS} {include}")
    op.execute(f"DROP INDEX {NAME}")
    op.execute(f"ALTER INDEX {NAME}_new RENAME TO {NAME}")


def upgrade() -> None:
    _replace("INCLUDE (status, search_text)")


def downgrade() -> None:
    _replace("")
