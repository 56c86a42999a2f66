"""outbox.retry_from: when an operator sent a failed copy back, the start of its new retry window

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 01:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no default: added without rewriting the table; None means "since arrival".
    op.add_column("outbox", sa.Column("retry_from", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("retry_from")
