"""Job search (C6 `q`) by each employer's own three-character grams, on PostgreSQL

The trigram index it replaces keyed the employer's id beside pg_trgm's trigrams, so every
search read the employer's whole entry (200,000 row pointers for the largest employer) to
intersect it with the word's. Here each key is the employer's id and a gram together
("1:zep"), so a search reads the pointers of that employer's rows holding the grams of `q`,
and costs what it finds, not what the employer has. `models.jobs.writes.listing` asks for them;
LIKE still decides (a row holding every gram of `q` need not hold `q`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 12:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every run of three characters of `content`, each prefixed with the employer's id. Applied
# to a job's (employer_id, search_text) for the index, and to (employer id, q) for a search.
GRAMS = """
CREATE FUNCTION jobpost_search_grams(employer integer, content text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT array(
        SELECT employer::text || ':' || substr(content, i, 3)
        FROM generate_series(1, length(content) - 2) AS i
    )
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite has no such index: its search reads the employer's jobs
    op.execute(GRAMS)
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")  # an index of ~30 keys a job
    op.execute(
        "CREATE INDEX ix_jobs_search_grams ON jobs "
        "USING gin (jobpost_search_grams(employer_id, search_text))"
    )
    op.execute("DROP INDEX ix_jobs_employer_search_trgm")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX ix_jobs_employer_search_trgm ON jobs "
        "USING gin (employer_id, search_text gin_trgm_ops)"
    )
    op.execute("DROP INDEX ix_jobs_search_grams")
    op.execute("DROP FUNCTION jobpost_search_grams(integer, text)")
