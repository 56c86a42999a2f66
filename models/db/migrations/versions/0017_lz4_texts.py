"""Long texts compressed with LZ4 (PostgreSQL)

A job's description (a few hundred words, and its translation) and a sync item's body are
compressed when stored (TOAST). With PostgreSQL's default, pglz, inserting a batch of 250
sync creates of 2.9 KB took the server 28.6 to 30.3 ms, with LZ4 22.4 to 28.9 ms (three of
four runs under 24.1, `docs/benchmarks.md`): LZ4 compresses and decompresses several times
faster, for every write and every read of a description. Rows already stored keep their compression
until they are written again. A server built without LZ4 keeps pglz: the migration then
changes nothing. SQLite compresses nothing.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("jobs", "description"),
    ("jobs", "translation_description"),
    ("sync_items", "body"),
)


# The methods this server was built with are the values default_toast_compression takes.
_LZ4_BUILT_IN = sa.text(
    "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
)


def _compress(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    if method == "lz4" and not bind.execute(_LZ4_BUILT_IN).scalar():
        return
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")


def upgrade() -> None:
    _compress("lz4")


def downgrade() -> None:
    _compress("pglz")
