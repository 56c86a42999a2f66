"""Privacy (C13): what an application's erasure must find besides its own rows

`idempotency_keys.application_id` names the application a recorded response created (the
API's 202 and the form's 303, whose body does not name it); `webhook_messages.application_id`
names the application an `application.received` event carries. Both are null otherwise, and
neither is a foreign key: erasure deletes the key and scrubs the message itself, and the
retention purge of applications has no reason to touch either.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 06:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("idempotency_keys", sa.Column("application_id", sa.Integer(), nullable=True))
    op.create_index("ix_idempotency_keys_application_id", "idempotency_keys", ["application_id"])
    op.add_column("webhook_messages", sa.Column("application_id", sa.Integer(), nullable=True))
    op.create_index("ix_webhook_messages_application_id", "webhook_messages", ["application_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_messages_application_id", table_name="webhook_messages")
    op.drop_column("webhook_messages", "application_id")
    op.drop_index("ix_idempotency_keys_application_id", table_name="idempotency_keys")
    op.drop_column("idempotency_keys", "application_id")
