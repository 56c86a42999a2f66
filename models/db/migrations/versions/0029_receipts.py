"""receipts: the applicant's receipt of an application and its status page's token (C20)

One row per application accepted through the API or the form: the outbox's columns (claimed,
leased, retried and swept as the copies are, C8), the language of the page applied on,
whether the job was confidential, and the SHA-256 of the status page's token. Its
application going (an erasure) leaves the row with `application_id` null, so the link says
the application was erased.

Revision ID: 0029
Revises: 0027
Create Date: 2026-12-03 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "receipts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("application_id", sa.Integer(), nullable=True),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("language", sa.String(length=2), nullable=False),
        sa.Column("confidential", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("erased_at", sa.DateTime(), nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("retry_from", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["application_id"],
            ["applications.id"],
            name=op.f("fk_receipts_application_id_applications"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_receipts")),
        sa.UniqueConstraint("application_id", name=op.f("uq_receipts_application_id")),
        sa.UniqueConstraint("digest", name=op.f("uq_receipts_digest")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_receipts_status_next", "receipts", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_receipts_status_next", table_name="receipts")
    op.drop_table("receipts")
