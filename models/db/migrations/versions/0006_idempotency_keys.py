"""idempotency_keys: Idempotency-Key marks and the responses recorded for replay (C10)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("first_used_at", sa.DateTime(), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("etag", sa.String(length=200), nullable=True),
        sa.Column("content_type", sa.String(length=200), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("scope", "scope_id", "key", name=op.f("pk_idempotency_keys")),
    )
    # The daily purge deletes by age (C10, C14).
    op.create_index(
        "ix_idempotency_keys_first_used_at", "idempotency_keys", ["first_used_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_first_used_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
