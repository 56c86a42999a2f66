"""job_tallies: each employer's jobs counted by status, kept by triggers on jobs (C6)

The job list's `total` counted the employer's jobs on every request: 43 to 49 ms for an
employer holding 200,000. The triggers write what each statement on jobs changes into
job_tallies, in the statement's own transaction, whichever code runs it (the API, upkeep's
set-based UPDATEs, deletes, an employer's cascade), so a list reads its total from a few
rows (models.jobs.tallies).

Rows are appended, never updated: a counter row per employer would make every writer of an
employer wait for the one before it to commit, and writers that touch several employers
(expiry) could deadlock with them. When an employer has more than COMPACT_AFTER rows, the
writer that added the last one sums them into one row per status, taking only rows no one
else holds (SKIP LOCKED on PostgreSQL; SQLite has one writer at a time), so it never waits.

`changes` (summed the same way) grows with every job added or deleted or changed in status,
employer or search text: the state of an employer's jobs it names is the one a search's
cached total was counted in. A TRUNCATE of jobs keeps each employer's sum of changes, plus
one, with no jobs.

employer_id has no foreign key: an employer's deletion cascades to its jobs, whose triggers
then add rows for it, which a cascade to job_tallies could have deleted already. Its rows
sum to no jobs once its jobs are gone.

On SQLite the triggers are on the table: a batch migration that copies jobs into a new table
drops them, and must create them again (tests/models/jobs/test_tallies.py checks them at head).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COMPACT_AFTER = 32  # rows of one employer; reading them costs a list a few microseconds each

FILL = """
INSERT INTO job_tallies (employer_id, status, jobs, changes)
SELECT employer_id, status, count(*), count(*) FROM jobs GROUP BY employer_id, status
"""

PG_COMPACT = """
CREATE FUNCTION jobpost_compact_tallies(employer integer) RETURNS void
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM job_tallies
        WHERE id IN (
            SELECT id FROM job_tallies WHERE employer_id = employer FOR UPDATE SKIP LOCKED
        )
        RETURNING status, jobs, changes
    )
    INSERT INTO job_tallies (employer_id, status, jobs, changes)
    SELECT employer, status, sum(jobs), sum(changes) FROM gone GROUP BY status
$$
"""

# One function for the three statement triggers, which see the rows a statement changed as
# new_jobs and old_jobs (an expiry of thousands of jobs adds a row per employer and status).
PG_TALLY = f"""
CREATE FUNCTION jobpost_tally_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    touched integer[];
    employer integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH added AS (
            INSERT INTO job_tallies (employer_id, status, jobs, changes)
            SELECT employer_id, status, count(*), count(*) FROM new_jobs
            GROUP BY employer_id, status
            RETURNING employer_id
        )
        SELECT array_agg(DISTINCT employer_id) INTO touched FROM added;
    ELSIF TG_OP = 'DELETE' THEN
        WITH added AS (
            INSERT INTO job_tallies (employer_id, status, jobs, changes)
            SELECT employer_id, status, -count(*), count(*) FROM old_jobs
            GROUP BY employer_id, status
            RETURNING employer_id
        )
        SELECT array_agg(DISTINCT employer_id) INTO touched FROM added;
    ELSE
        WITH added AS (
            INSERT INTO job_tallies (employer_id, status, jobs, changes)
            SELECT d.employer_id, d.status, sum(d.jobs), sum(d.changes)
            FROM old_jobs o
            JOIN new_jobs n ON n.id = o.id
            CROSS JOIN LATERAL (
                VALUES (o.employer_id, o.status, -1, 1), (n.employer_id, n.status, 1, 0)
            ) AS d (employer_id, status, jobs, changes)
            WHERE (o.employer_id, o.status, o.search_text)
                IS DISTINCT FROM (n.employer_id, n.status, n.search_text)
            GROUP BY d.employer_id, d.status
            RETURNING employer_id
        )
        SELECT array_agg(DISTINCT employer_id) INTO touched FROM added;
    END IF;
    FOREACH employer IN ARRAY coalesce(touched, '{{}}') LOOP
        IF (SELECT count(*) FROM job_tallies WHERE employer_id = employer) > {COMPACT_AFTER} THEN
            PERFORM jobpost_compact_tallies(employer);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$
"""

PG_TRUNCATE = """
CREATE FUNCTION jobpost_tally_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (DELETE FROM job_tallies RETURNING employer_id, changes)
    INSERT INTO job_tallies (employer_id, status, jobs, changes)
    SELECT employer_id, 'active', 0, sum(changes) + 1 FROM gone GROUP BY employer_id;
    RETURN NULL;
END
$$
"""

PG_TRIGGERS = {
    "jobs_tally_insert": "AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_jobs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobpost_tally_jobs()",
    "jobs_tally_update": "AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_jobs "
    "NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION jobpost_tally_jobs()",
    "jobs_tally_delete": "AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_jobs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobpost_tally_jobs()",
    "jobs_tally_truncate": "AFTER TRUNCATE ON jobs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobpost_tally_truncate()",
}
PG_FUNCTIONS = (
    "jobpost_tally_jobs()",
    "jobpost_tally_truncate()",
    "jobpost_compact_tallies(integer)",
)

_ADD = "INSERT INTO job_tallies (employer_id, status, jobs, changes) VALUES"
# SQLite has row triggers only. Its writers take the database in turn, so the compaction can
# sum every row of the employer up to the one just added.
SQLITE_TRIGGERS = {
    "jobs_tally_insert": f"""AFTER INSERT ON jobs BEGIN
        {_ADD} (NEW.employer_id, NEW.status, 1, 1);
    END""",
    "jobs_tally_delete": f"""AFTER DELETE ON jobs BEGIN
        {_ADD} (OLD.employer_id, OLD.status, -1, 1);
    END""",
    "jobs_tally_update": f"""AFTER UPDATE OF employer_id, status, search_text ON jobs
    WHEN OLD.employer_id IS NOT NEW.employer_id OR OLD.status IS NOT NEW.status
        OR OLD.search_text IS NOT NEW.search_text
    BEGIN
        {_ADD} (OLD.employer_id, OLD.status, -1, 1);
        {_ADD} (NEW.employer_id, NEW.status, 1, 0);
    END""",
    "job_tallies_compact": f"""AFTER INSERT ON job_tallies
    WHEN (SELECT count(*) FROM job_tallies WHERE employer_id = NEW.employer_id) > {COMPACT_AFTER}
    BEGIN
        INSERT INTO job_tallies (employer_id, status, jobs, changes)
        SELECT employer_id, status, sum(jobs), sum(changes) FROM job_tallies
        WHERE employer_id = NEW.employer_id AND id <= NEW.id GROUP BY status;
        DELETE FROM job_tallies WHERE employer_id = NEW.employer_id AND id <= NEW.id;
    END""",
}


def upgrade() -> None:
    op.create_table(
        "job_tallies",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_tallies")),
    )
    op.create_index("ix_job_tallies_employer", "job_tallies", ["employer_id"])
    if op.get_bind().dialect.name == "postgresql":
        for function in (PG_COMPACT, PG_TALLY, PG_TRUNCATE):
            op.execute(function)
        for name, definition in PG_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {definition}")  # writers wait from here on
    else:
        for name, definition in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {definition}")
    op.execute(FILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in PG_TRIGGERS:
            op.execute(f"DROP TRIGGER {name} ON jobs")
        for function in PG_FUNCTIONS:
            op.execute(f"DROP FUNCTION {function}")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_index("ix_job_tallies_employer", table_name="job_tallies")
    op.drop_table("job_tallies")
