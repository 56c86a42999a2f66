"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 12:29:23.229190
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "categories",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_categories")),
    )
    op.create_table(
        "employers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("plan", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_employers")),
    )
    op.create_table(
        "locations",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.String(length=300), nullable=False),
        sa.Column("type", sa.String(length=50), nullable=False),
        sa.Column("province_code", sa.String(length=2), nullable=False),
        sa.Column("latitude", sa.Float(), nullable=True),
        sa.Column("longitude", sa.Float(), nullable=True),
        sa.Column("population", sa.BigInteger(), nullable=False),
        sa.Column("listed", sa.Boolean(), nullable=False),
        sa.Column("name_key", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_locations")),
    )
    with op.batch_alter_table("locations", schema=None) as batch_op:
        batch_op.create_index("ix_locations_listed_name", ["listed", "name"], unique=False)

    op.create_table(
        "position_types",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=10), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_position_types")),
    )
    op.create_table(
        "salary_periods",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("unit", sa.String(length=50), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_salary_periods")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=12), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_api_keys_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("reference_id", sa.String(length=50), nullable=True),
        sa.Column("title", sa.String(length=256), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("publish_date", sa.Date(), nullable=False),
        sa.Column("close_date", sa.Date(), nullable=False),
        sa.Column("confidential", sa.Boolean(), nullable=False),
        sa.Column("auto_refresh", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("position_type_id", sa.Integer(), nullable=False),
        sa.Column("salary_amount", sa.Numeric(precision=12, scale=2), nullable=True),
        sa.Column("salary_max", sa.Numeric(precision=12, scale=2), nullable=True),
        sa.Column("salary_period_id", sa.Integer(), nullable=True),
        sa.Column("salary_commission", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("routing_type", sa.Integer(), nullable=False),
        sa.Column("application_email", sa.String(length=50), nullable=True),
        sa.Column("application_url", sa.String(length=200), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_jobs_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["position_type_id"],
            ["position_types.id"],
            name=op.f("fk_jobs_position_type_id_position_types"),
        ),
        sa.ForeignKeyConstraint(
            ["salary_period_id"],
            ["salary_periods.id"],
            name=op.f("fk_jobs_salary_period_id_salary_periods"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_employer_published",
            ["employer_id", sa.literal_column("publish_date DESC"), sa.literal_column("id DESC")],
            unique=False,
        )
        batch_op.create_index("ix_jobs_status_close", ["status", "close_date"], unique=False)
        batch_op.create_index(
            "uq_jobs_employer_reference", ["employer_id", "reference_id"], unique=True
        )

    if op.get_bind().dialect.name == "postgresql":
        # Substring search for `q` (C6) at a million jobs: a trigram index serves LIKE '%x%'.
        # Every listing is one employer's, so the employer id leads (btree_gin makes it a GIN key).
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        op.execute(
            "CREATE INDEX ix_jobs_employer_search_trgm ON jobs "
            "USING gin (employer_id, search_text gin_trgm_ops)"
        )

    op.create_table(
        "location_names",
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("location_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["location_id"],
            ["locations.id"],
            name=op.f("fk_location_names_location_id_locations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key", "location_id", name=op.f("pk_location_names")),
    )
    op.create_table(
        "applications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("employer_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("phone", sa.String(length=30), nullable=True),
        sa.Column("cover_letter", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("job_title", sa.String(length=256), nullable=False),
        sa.Column("job_reference_id", sa.String(length=50), nullable=True),
        sa.Column("application_email", sa.String(length=50), nullable=False),
        sa.Column("employer_name", sa.String(length=128), nullable=False),
        sa.Column("resume_filename", sa.String(length=120), nullable=True),
        sa.Column("resume_content_type", sa.String(length=100), nullable=True),
        sa.Column("resume_size", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["employer_id"],
            ["employers.id"],
            name=op.f("fk_applications_employer_id_employers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_applications_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_applications")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("applications", schema=None) as batch_op:
        batch_op.create_index(
            "ix_applications_employer_received",
            ["employer_id", sa.literal_column("received_at DESC"), sa.literal_column("id DESC")],
            unique=False,
        )
        batch_op.create_index("ix_applications_job", ["job_id"], unique=False)

    op.create_table(
        "job_categories",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("category_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["category_id"],
            ["categories.id"],
            name=op.f("fk_job_categories_category_id_categories"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_categories_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_job_categories")),
    )
    op.create_table(
        "job_locations",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("location_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_locations_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["location_id"], ["locations.id"], name=op.f("fk_job_locations_location_id_locations")
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_job_locations")),
    )
    op.create_table(
        "outbox",
        sa.Column("application_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["application_id"],
            ["applications.id"],
            name=op.f("fk_outbox_application_id_applications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("application_id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_status_next", ["status", "next_attempt_at"], unique=False)

    op.create_table(
        "resumes",
        sa.Column("application_id", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["application_id"],
            ["applications.id"],
            name=op.f("fk_resumes_application_id_applications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("application_id", name=op.f("pk_resumes")),
    )


def downgrade() -> None:
    op.drop_table("resumes")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_status_next")

    op.drop_table("outbox")
    op.drop_table("job_locations")
    op.drop_table("job_categories")
    with op.batch_alter_table("applications", schema=None) as batch_op:
        batch_op.drop_index("ix_applications_job")
        batch_op.drop_index("ix_applications_employer_received")

    op.drop_table("applications")
    op.drop_table("location_names")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("uq_jobs_employer_reference")
        batch_op.drop_index("ix_jobs_status_close")
        batch_op.drop_index("ix_jobs_employer_published")

    op.drop_table("jobs")
    op.drop_table("api_keys")
    op.drop_table("salary_periods")
    op.drop_table("position_types")
    with op.batch_alter_table("locations", schema=None) as batch_op:
        batch_op.drop_index("ix_locations_listed_name")

    op.drop_table("locations")
    op.drop_table("employers")
    op.drop_table("categories")
