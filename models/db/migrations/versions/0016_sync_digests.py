"""Sync digests (C11): what a sync run's write of a job leaves for the item's resend

`jobs.sync_digest` is the digest of the item a sync run wrote, of the job's version after
that write, and of everything the item's check depends on (the employer's plan and
compliance settings, the day, the rules' code); `jobs.sync_warnings` the warnings (C10) the
same item answers when it is sent again unchanged. A resent item whose digest matches is
unchanged without being checked again (models.syncs.digests). Both are null after any other
write, and stale once the version moves. Nullable without a default: no table rewrite.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 09:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("sync_digest", sa.String(32), nullable=True))
    op.add_column("jobs", sa.Column("sync_warnings", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "sync_warnings")
    op.drop_column("jobs", "sync_digest")
