"""Webhook deliveries in flight and waiting, by endpoint (C12's caps)

The caps count an endpoint's deliveries `sending` under a live lease, at every claim and at
every attempt's end (`models.webhooks.delivery`). Read through the endpoint's index of every
delivery it ever had, each count cost a reading of that history, and the hand-on, counting
for each waiting delivery in turn, its square: a backlog of a thousand held one endpoint to
about ten deliveries a second whatever its cap (the engine bench). These partial indexes hold
only the deliveries sending and those waiting for a place (pending, out of the broker).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-03 08:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SENDING = sa.text("status = 'sending'")
WAITING = sa.text("status = 'pending' AND lease_until IS NULL")


def upgrade() -> None:
    op.create_index(
        "ix_webhook_deliveries_sending",
        "webhook_deliveries",
        ["endpoint_id", "lease_until"],
        postgresql_where=SENDING,
        sqlite_where=SENDING,
    )
    op.create_index(
        "ix_webhook_deliveries_waiting",
        "webhook_deliveries",
        ["endpoint_id", "id"],
        postgresql_where=WAITING,
        sqlite_where=WAITING,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_waiting", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_sending", table_name="webhook_deliveries")
