"""jobs.opened_at and the digest range of alert_mails (C19): what "new" means for an alert

A job is new to an alert when it first became open (active, not taken down) after the
alert's watermark. `opened_at` is that instant: the `updated_at` of the write that first
made it open, set by a trigger on jobs whichever code writes (the API, sync runs, upkeep,
an operator), and never moved after, so a job closed and opened again is not new twice.
`updated_at` is the change feed's stamp (C10): a change commits within half of
CHANGE_FEED_LAG_SECONDS of it, so a planner that reads openings up to that lag before now
never passes one that commits later.

Open jobs already there get `updated_at` (their opening was then or before): a job edited
after an alert was confirmed may reach that alert once, none is ever missed.

alert_mails gains the range of openings a digest covers, (`opened_from`, `opened_until`],
so each attempt of it sends the same jobs and moves the watermark to the same place; and the
alerts are indexed by their search, which the planner asks once for all of its alerts.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 08:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN_PG = "status = 'active' AND taken_down = false"
OPEN_SQLITE = "status = 'active' AND taken_down = 0"
UNDER_WAY = "kind = 'digest' AND status IN ('pending', 'sending')"

PG_FUNCTION = """
CREATE FUNCTION jobpost_job_opened() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.opened_at IS NULL AND NEW.status = 'active' AND NOT NEW.taken_down THEN
        NEW.opened_at := NEW.updated_at;
    END IF;
    RETURN NEW;
END $$
"""
PG_TRIGGER = (
    "CREATE TRIGGER jobs_opened BEFORE INSERT OR UPDATE OF status, taken_down ON jobs "
    "FOR EACH ROW EXECUTE FUNCTION jobpost_job_opened()"
)
# SQLite's row triggers cannot change NEW: they set it on the row just written.
_SET = "UPDATE jobs SET opened_at = NEW.updated_at WHERE id = NEW.id;"
_WHEN = "WHEN NEW.opened_at IS NULL AND NEW.status = 'active' AND NEW.taken_down = 0"
SQLITE_TRIGGERS = {
    "jobs_opened_insert": f"AFTER INSERT ON jobs {_WHEN} BEGIN {_SET} END",
    "jobs_opened_update": f"AFTER UPDATE OF status, taken_down ON jobs {_WHEN} BEGIN {_SET} END",
}


def upgrade() -> None:
    op.add_column("jobs", sa.Column("opened_at", sa.DateTime(), nullable=True))
    op.add_column("alert_mails", sa.Column("opened_from", sa.DateTime(), nullable=True))
    op.add_column("alert_mails", sa.Column("opened_until", sa.DateTime(), nullable=True))
    postgres = op.get_bind().dialect.name == "postgresql"
    is_open = OPEN_PG if postgres else OPEN_SQLITE
    op.execute(f"UPDATE jobs SET opened_at = updated_at WHERE {is_open}")
    if postgres:
        op.execute(PG_FUNCTION)
        op.execute(PG_TRIGGER)
    else:
        for name, definition in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {definition}")
    # A search's newest opening walks back from the planner's bound (models.alerts.digests).
    op.create_index(
        "ix_jobs_open_opened",
        "jobs",
        [sa.text("opened_at DESC"), sa.text("id DESC")],
        postgresql_where=sa.text(OPEN_PG),
        sqlite_where=sa.text(OPEN_SQLITE),
    )
    # The due alerts of one search, which the planner queues in one statement. A hash index on
    # PostgreSQL: a stored search has no length bound a B-tree entry could hold.
    op.create_index(
        "ix_alert_subscriptions_filters",
        "alert_subscriptions",
        ["filters"],
        postgresql_using="hash",
    )
    # One digest under way per alert, whatever runs the planner (two beats, an operator's run
    # beside the beat's): a second INSERT of it fails rather than send the same jobs twice.
    op.create_index(
        "uq_alert_mails_digest_under_way",
        "alert_mails",
        ["subscription_id"],
        unique=True,
        postgresql_where=sa.text(UNDER_WAY),
        sqlite_where=sa.text(UNDER_WAY),
    )


def downgrade() -> None:
    op.drop_index("uq_alert_mails_digest_under_way", table_name="alert_mails")
    op.drop_index("ix_alert_subscriptions_filters", table_name="alert_subscriptions")
    op.drop_index("ix_jobs_open_opened", table_name="jobs")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_opened ON jobs")
        op.execute("DROP FUNCTION jobpost_job_opened()")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_column("alert_mails", "opened_until")
    op.drop_column("alert_mails", "opened_from")
    op.drop_column("jobs", "opened_at")
