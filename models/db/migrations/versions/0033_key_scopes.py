"""key scopes: what each API key may do, when it expires, when it was last used (C23)

`scopes` is the key's scopes as a space-separated list (OAuth 2.0's `scope` syntax); null is
every scope, which keys made before this revision keep. `expires_at` ends a key (a rotation
sets the old key's to the end of its overlap); `last_used_at` is kept to the minute;
`description` is the employer's own label for the key.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-04 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns added in place (SQLite's ADD COLUMN): the table is not copied.
    op.add_column("api_keys", sa.Column("scopes", sa.Text(), nullable=True))
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(), nullable=True))
    op.add_column("api_keys", sa.Column("last_used_at", sa.DateTime(), nullable=True))
    op.add_column("api_keys", sa.Column("description", sa.String(length=200), nullable=True))


def downgrade() -> None:
    for column in ("description", "last_used_at", "expires_at", "scopes"):
        op.drop_column("api_keys", column)
