"""The public search (C17) at the seeded million: its words, places and categories by index

Three indexes the search page's filters lacked, each found by the api bench:
- `ix_jobs_open_grams`, on PostgreSQL: the search grams of every open job (active, not taken
  down), keyed without an employer (`jobpost_search_grams(0, …)`, migration 0003), so `q`
  across all employers reads the open jobs holding its grams instead of testing every open
  job's text in turn;
- `ix_job_locations_location` and `ix_job_categories_category`: the jobs of a place and of a
  category, so a rare place or category reads its own jobs rather than walking every open job
  to find a page of them.

Revision ID: 0026
Revises: 0024
Create Date: 2026-12-03 08:30:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_job_locations_location", "job_locations", ["location_id", "job_id"])
    op.create_index("ix_job_categories_category", "job_categories", ["category_id", "job_id"])
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite has no gram index: its search tests each open job's text
    op.execute("SET LOCAL maintenance_work_mem = '256MB'")
    op.execute(
        "CREATE INDEX ix_jobs_open_grams ON jobs "
        "USING gin (jobpost_search_grams(0, search_text)) "
        "WHERE status = 'active' AND taken_down = false"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_jobs_open_grams")
    op.drop_index("ix_job_categories_category", table_name="job_categories")
    op.drop_index("ix_job_locations_location", table_name="job_locations")
