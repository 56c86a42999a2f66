"""Job search text folded with Unicode normalisation (C6 `q`, models.jobs.writes.fold)

The search text was the casefolded title and referenceId: a title sent with a decomposed é
("Montre\u0301al") was not found by "Montréal" typed with a composed one, nor a full-width
"ＣＯＯＫ" by "cook". models.jobs.writes.fold now normalises both sides (NFKC around the casefold);
this brings the stored search text of existing jobs to it. Only text outside ASCII can
change, so on PostgreSQL only such rows are read.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from models.jobs.search import search_text

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000
jobs = sa.table(
    "jobs",
    sa.column("id", sa.Integer),
    sa.column("title", sa.Text),
    sa.column("reference_id", sa.Text),
    sa.column("search_text", sa.Text),
)


def upgrade() -> None:
    bind = op.get_bind()
    rows = sa.select(jobs.c.id, jobs.c.title, jobs.c.reference_id, jobs.c.search_text)
    if bind.dialect.name == "postgresql":
        rows = rows.where(jobs.c.search_text.regexp_match("[^\\x01-\\x7f]"))
    last = 0
    while batch := bind.execute(
        rows.where(jobs.c.id > last).order_by(jobs.c.id).limit(BATCH)
    ).all():
        last = batch[-1].id
        changed = [
            {"row_id": r.id, "text": new}
            for r in batch
            if (new := search_text(r.title, r.reference_id)) != r.search_text
        ]
        if changed:
            bind.execute(
                jobs.update()
                .where(jobs.c.id == sa.bindparam("row_id"))
                .values(search_text=sa.bindparam("text")),
                changed,
            )


def downgrade() -> None:
    """Nothing to undo: the folded text is a search key, and casefolded-only text was less
    of one. Searches still find what they found before, and more."""
