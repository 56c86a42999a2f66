"""bounces: delivery status notifications of the employers' copies, and flagged addresses (C22)

`bounces` keeps each failure reported for a copy (a DSN received by `jobpost bounces`, or the
relay refusing the recipient at RCPT), permanent or temporary, with its status code and reason;
it goes with its application (an erasure). `bounce_drops` counts, by reason, what the receiver
took and dropped (not a DSN, forged, for no known copy). `address_flags` counts the hard
bounces of each employer's application address since the employer last cleared it, and when
it was flagged; `address_notices`, the outbox's fifth kind, the emails telling an employer's
`notification_email` (a new setting) of a flag. A copy's status gains `undeliverable`,
longer than the ten characters the column had.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-04 19:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.alter_column(
            "status", existing_type=sa.String(length=10), type_=sa.String(length=16)
        )
    with op.batch_alter_table("employers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("notification_email", sa.String(length=254), nullable=True))
    op.create_table(
        "address_notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=320), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("retry_from", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_address_notices_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_address_notices")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_address_notices_status_next", "address_notices", ["status", "next_attempt_at"]
    )
    op.create_table(
        "bounces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("application_id", sa.Integer(), nullable=False),
        sa.Column("permanent", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=9), nullable=False),
        sa.Column("reason", sa.String(length=20), nullable=False),
        sa.Column("diagnostic", sa.Text(), nullable=True),
        sa.Column("source", sa.String(length=4), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["application_id"],
            ["applications.id"],
            name=op.f("fk_bounces_application_id_applications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bounces")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_bounces_application", "bounces", ["application_id", "id"])
    op.create_table(
        "bounce_drops",
        sa.Column("reason", sa.String(length=20), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("last_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("reason", name=op.f("pk_bounce_drops")),
    )
    op.create_table(
        "address_flags",
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=320), nullable=False),
        sa.Column("hard_bounces", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=20), nullable=False),
        sa.Column("last_bounce_at", sa.DateTime(), nullable=False),
        sa.Column("flagged_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_address_flags_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("employer_id", "address", name=op.f("pk_address_flags")),
    )


def downgrade() -> None:
    op.drop_index("ix_address_notices_status_next", table_name="address_notices")
    op.drop_table("address_notices")
    with op.batch_alter_table("employers", schema=None) as batch_op:
        batch_op.drop_column("notification_email")
    op.drop_table("address_flags")
    op.drop_table("bounce_drops")
    op.drop_index("ix_bounces_application", table_name="bounces")
    op.drop_table("bounces")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.alter_column(
            "status", existing_type=sa.String(length=16), type_=sa.String(length=10)
        )
