"""Webhook deliveries in flight and waiting, by endpoint, and the caps in one statement (C12)

The caps count an endpoint's deliveries `sending` under a live lease, at every claim and at
every attempt's end (`models.webhooks.delivery`). Read through the endpoint's index of every
delivery it ever had, each count cost a reading of that history, and the hand-on, counting
for each waiting delivery in turn, its square: a backlog of a thousand held one endpoint to
about ten deliveries a second whatever its cap (the engine bench). These partial indexes hold
only the deliveries sending and those waiting for a place (pending, out of the broker).

On PostgreSQL `jobpost_webhook_room` counts the caps for the claim's UPDATE, after taking the
employer's turn (a transaction advisory lock): a VOLATILE function's statements each read what
committed before them, so the counts see every claim that held the turn before, and the claim
is one statement, its turn ending with its transaction. Taken in a statement of its own before
the UPDATE, the turn was held over two more round trips of a worker thread.

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
# 0x6A6F6200, "job\0": the lock space models.webhooks.delivery's claims took turns in.
ROOM = """
CREATE FUNCTION jobpost_webhook_room(
    endpoint integer, now timestamp, endpoint_cap integer, employer_cap integer
) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    owner integer;
BEGIN
    SELECT employer_id INTO owner FROM webhook_endpoints WHERE id = endpoint;
    IF owner IS NULL THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(1785684480, owner);
    RETURN (
        SELECT count(*) FROM webhook_deliveries
        WHERE endpoint_id = endpoint AND status = 'sending' AND lease_until >= now
    ) < endpoint_cap AND (
        SELECT count(*) FROM webhook_deliveries AS d
        JOIN webhook_endpoints AS e ON e.id = d.endpoint_id
        WHERE e.employer_id = owner AND d.status = 'sending' AND d.lease_until >= now
    ) < employer_cap;
END
$$
"""


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
    if op.get_bind().dialect.name == "postgresql":
        op.execute(ROOM)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION jobpost_webhook_room(integer, timestamp, integer, integer)")
    op.drop_index("ix_webhook_deliveries_waiting", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_sending", table_name="webhook_deliveries")
