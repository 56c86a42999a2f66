"""alert_subscriptions, alert_tokens and alert_mails (C19): job alerts, by double opt-in

A subscription is an address, a language, a frequency and a search (the feed's filters as a
normalised query string), pending until its confirmation link is followed. Its links'
tokens are kept as SHA-256 digests only, in their own table, one row per link sent; its
emails are the outbox's third kind (the columns of `outbox`, C8).

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-02 15:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_subscriptions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("language", sa.String(length=2), nullable=False),
        sa.Column("frequency", sa.String(length=6), nullable=False),
        sa.Column("filters", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(), nullable=True),
        sa.Column("unsubscribed_at", sa.DateTime(), nullable=True),
        sa.Column("last_sent_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_subscriptions")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_alert_subscriptions_email", "alert_subscriptions", ["email"])
    op.create_index(
        "ix_alert_subscriptions_due", "alert_subscriptions", ["state", "frequency", "last_sent_at"]
    )
    op.create_table(
        "alert_tokens",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["alert_subscriptions.id"],
            name=op.f("fk_alert_tokens_subscription_id_alert_subscriptions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_alert_tokens")),
    )
    op.create_index("ix_alert_tokens_subscription_id", "alert_tokens", ["subscription_id"])
    op.create_table(
        "alert_mails",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
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
            ["subscription_id"],
            ["alert_subscriptions.id"],
            name=op.f("fk_alert_mails_subscription_id_alert_subscriptions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_mails")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_alert_mails_subscription_id", "alert_mails", ["subscription_id"])
    op.create_index("ix_alert_mails_status_next", "alert_mails", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_alert_mails_status_next", table_name="alert_mails")
    op.drop_index("ix_alert_mails_subscription_id", table_name="alert_mails")
    op.drop_table("alert_mails")
    op.drop_index("ix_alert_tokens_subscription_id", table_name="alert_tokens")
    op.drop_table("alert_tokens")
    op.drop_index("ix_alert_subscriptions_due", table_name="alert_subscriptions")
    op.drop_index("ix_alert_subscriptions_email", table_name="alert_subscriptions")
    op.drop_table("alert_subscriptions")
