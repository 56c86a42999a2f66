"""The tables of jobpost as typed SQLAlchemy entities."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    String,
    Text,
    TypeDecorator,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Stable constraint names, so migrations can name what they alter.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite keeps no offset)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Employer(Base):
    __tablename__ = "employers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    plan: Mapped[str] = mapped_column(String(16), default="standard")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The language of the emails it receives (C13): "en" or "fr". A server default alone, so
    # an INSERT that leaves it out also works on a schema before 0012 (migration tests).
    language: Mapped[str] = mapped_column(String(2), server_default="en")
    # Which writes the rules of C13 refuse (`enforce`), only warn of (`warn`), or neither
    # (`off`); and whether it has 25+ employees in Ontario, whose rules apply only then.
    compliance: Mapped[str] = mapped_column(String(8), default="warn", server_default="warn")
    ontario25_plus: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # Whether an application knocked out by a screening question is emailed (marked) as any
    # other, or only stored (C21).
    email_knocked_out: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # Where the service writes when one of its application addresses is flagged (C22),
    # beside its webhooks; None: webhooks only.
    notification_email: Mapped[str | None] = mapped_column(String(254))
    # Its application addresses that hard-bounced FLAG_AFTER times (C22), by address.
    flagged_addresses: Mapped[list[AddressFlag]] = relationship(
        primaryjoin="and_(AddressFlag.employer_id == Employer.id,"
        " AddressFlag.flagged_at.is_not(None))",
        order_by="AddressFlag.address",
        viewonly=True,
    )


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(12), unique=True)
    digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # C23: its scopes, space-separated (None: every scope, as keys made before scopes had),
    # when it stops working, when it was last used (to the minute), the employer's label.
    scopes: Mapped[str | None] = mapped_column(Text)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    description: Mapped[str | None] = mapped_column(String(200))
    employer: Mapped[Employer] = relationship(lazy="joined")


class PositionType(Base):
    __tablename__ = "position_types"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(10))


class Category(Base):
    __tablename__ = "categories"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(40))


class SalaryPeriod(Base):
    __tablename__ = "salary_periods"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(50))
    unit: Mapped[str] = mapped_column(String(50))


class Location(Base):
    """A gazetteer place (GeoNames id) or a province/territory (ids 1 to 13), C3."""

    __tablename__ = "locations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str] = mapped_column(String(300))
    type: Mapped[str] = mapped_column(String(50))
    province_code: Mapped[str] = mapped_column(String(2))
    latitude: Mapped[float | None] = mapped_column(Float)
    longitude: Mapped[float | None] = mapped_column(Float)
    population: Mapped[int] = mapped_column(BigInteger, default=0)
    listed: Mapped[bool] = mapped_column(Boolean, default=False)  # in GET /locations
    name_key: Mapped[str] = mapped_column(String(256))  # folded name, for `q`
    __table_args__ = (Index("ix_locations_listed_name", "listed", "name"),)


class LocationName(Base):
    """A folded name (official or alternate) by which a place can be written (C3)."""

    __tablename__ = "location_names"
    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    location_id: Mapped[int] = mapped_column(
        ForeignKey("locations.id", ondelete="CASCADE"), primary_key=True
    )


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    reference_id: Mapped[str | None] = mapped_column(String(50))
    title: Mapped[str] = mapped_column(String(256))
    search_text: Mapped[str] = mapped_column(Text)  # title + referenceId, folded (C6)
    publish_date: Mapped[date] = mapped_column(Date)
    close_date: Mapped[date] = mapped_column(Date)
    confidential: Mapped[bool] = mapped_column(Boolean, default=False)
    auto_refresh: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(10))
    position_type_id: Mapped[int] = mapped_column(ForeignKey("position_types.id"))
    salary_amount: Mapped[Decimal | None] = mapped_column(Numeric(12, 2))
    salary_max: Mapped[Decimal | None] = mapped_column(Numeric(12, 2))
    salary_period_id: Mapped[int | None] = mapped_column(ForeignKey("salary_periods.id"))
    salary_commission: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(Text)
    routing_type: Mapped[int] = mapped_column(Integer)
    application_email: Mapped[str | None] = mapped_column(String(50))
    application_url: Mapped[str | None] = mapped_column(String(200))
    # The language of title and description, and both in the other language (C13); the
    # translation's two columns are both set or both null.
    language: Mapped[str] = mapped_column(String(2), server_default="en")
    translation_title: Mapped[str | None] = mapped_column(String(256))
    translation_description: Mapped[str | None] = mapped_column(Text)
    # The posting statements of C13: AI used to screen applicants; an existing vacancy. Null:
    # not stated.
    ai_screening: Mapped[bool | None] = mapped_column(Boolean)
    existing_vacancy: Mapped[bool | None] = mapped_column(Boolean)
    # Where the job is done and whom it takes (C16): `onSite`, `hybrid` or `remote`, and the
    # applicant locations as stored (`models.jobs.workplace`), "" for the type's default.
    workplace_type: Mapped[str] = mapped_column(String(8), server_default="onSite")
    applicant_locations: Mapped[str] = mapped_column(String(64), server_default=text("''"))
    # Taken down by the operator after a fraud report (C13): archived, and no write makes
    # it active again. No Python default: the ORM then leaves it out of INSERTs, as schemas
    # before migration 0013 (tests of older migrations) need.
    taken_down: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # Its screening questions in read shape as JSON text, null for none (C21, migration 0030).
    questions: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Left by a sync run's write (C11, models.syncs.digests): the digest of the item written and
    # of all its check depends on, and the warnings its unchanged resend answers. Null after
    # any other write; stale once the version moves.
    sync_digest: Mapped[str | None] = mapped_column(String(32))
    sync_warnings: Mapped[str | None] = mapped_column(Text)
    # Raised by every write (`models.jobs.rows`, the upkeep UPDATEs): the API serves a cached
    # representation only while the row still has the version it was made from.
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # When it first became open (active, not taken down): the `updated_at` of that write, set
    # by a trigger (migration 0023) and never moved after. What makes a job new to a job
    # alert (C19). No Python default: the ORM leaves it to the trigger.
    opened_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    employer: Mapped[Employer] = relationship(lazy="joined")
    position_type: Mapped[PositionType] = relationship(lazy="joined")
    salary_period: Mapped[SalaryPeriod | None] = relationship(lazy="joined")
    job_locations: Mapped[list[JobLocation]] = relationship(
        order_by="JobLocation.position", cascade="all, delete-orphan", lazy="selectin"
    )
    job_categories: Mapped[list[JobCategory]] = relationship(
        order_by="JobCategory.position", cascade="all, delete-orphan", lazy="selectin"
    )

    __table_args__ = (
        Index(
            "ix_jobs_employer_published",
            "employer_id",
            publish_date.desc(),
            id.desc(),
            postgresql_include=["status", "search_text"],  # a list's walk reads no row (0008)
        ),
        Index("uq_jobs_employer_reference", "employer_id", "reference_id", unique=True),
        # The change feed's walk by (updated_at, id) from a position (C10, migration 0009).
        Index("ix_jobs_employer_updated", "employer_id", "updated_at", "id"),
        # The digest's read of an employer's jobs, from the index alone (C24, migration 0032);
        # SQLite's indexes hold the rowid (id) anyway.
        Index(
            "ix_jobs_employer_digest",
            "employer_id",
            "status",
            "reference_id",
            "version",
            postgresql_include=["id"],
        ),
        Index("ix_jobs_status_close", "status", "close_date"),
        # The public search's two orders over the open jobs (C17, migration 0022).
        Index(
            "ix_jobs_open_published",
            publish_date.desc(),
            id.desc(),
            postgresql_where=text("status = 'active' AND taken_down = false"),
            sqlite_where=text("status = 'active' AND taken_down = 0"),
        ),
        Index(
            "ix_jobs_open_closing",
            "close_date",
            "id",
            postgresql_where=text("status = 'active' AND taken_down = false"),
            sqlite_where=text("status = 'active' AND taken_down = 0"),
        ),
        # A search's newest opening, for the alerts' digests (C19, migration 0023).
        Index(
            "ix_jobs_open_opened",
            opened_at.desc(),
            id.desc(),
            postgresql_where=text("status = 'active' AND taken_down = false"),
            sqlite_where=text("status = 'active' AND taken_down = 0"),
        ),
        # A deleted job's id must never name a new job (SQLite reuses rowids without this).
        {"sqlite_autoincrement": True},
    )

    @property
    def locations(self) -> list[Location]:
        return [jl.location for jl in self.job_locations]

    @property
    def categories(self) -> list[Category]:
        return [jc.category for jc in self.job_categories]


class JobTally(Base):
    """A change in the count of an employer's jobs of one status, written by the database's
    triggers on jobs (migration 0007) in the transaction that changes them, so every path
    (the API, upkeep's set-based UPDATEs, deletes, cascades) keeps the counts right.

    Rows are only ever added, and now and then an employer's rows are summed into one per
    status: writers never wait for one another on a counter row. An employer's jobs of a
    status are the sum of `jobs`; the sum of `changes` grows with every job added, deleted,
    or changed in status or search text, so it names the state a search's total was counted
    in (models.jobs.tallies)."""

    __tablename__ = "job_tallies"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    employer_id: Mapped[int] = mapped_column(Integer)  # no foreign key: see migration 0007
    status: Mapped[str] = mapped_column(String(10))
    jobs: Mapped[int] = mapped_column(Integer)
    changes: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_job_tallies_employer", "employer_id"),)


class JobLocation(Base):
    __tablename__ = "job_locations"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    location_id: Mapped[int] = mapped_column(ForeignKey("locations.id"))
    location: Mapped[Location] = relationship(lazy="joined")
    # The jobs of a place, for the public search's `place` (C17, migration 0026).
    __table_args__ = (Index("ix_job_locations_location", "location_id", "job_id"),)


class JobCategory(Base):
    __tablename__ = "job_categories"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    category_id: Mapped[int] = mapped_column(ForeignKey("categories.id"))
    category: Mapped[Category] = relationship(lazy="joined")
    # The jobs of a category, for the public search's `category` (C17, migration 0026).
    __table_args__ = (Index("ix_job_categories_category", "category_id", "job_id"),)


class Application(Base):
    """An application, with a snapshot of the job so delivery survives its deletion (C8)."""

    __tablename__ = "applications"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    email: Mapped[str] = mapped_column(String(320))
    phone: Mapped[str | None] = mapped_column(String(30))
    cover_letter: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    job_title: Mapped[str] = mapped_column(String(256))
    job_reference_id: Mapped[str | None] = mapped_column(String(50))
    application_email: Mapped[str] = mapped_column(String(50))
    employer_name: Mapped[str] = mapped_column(String(128))
    resume_filename: Mapped[str | None] = mapped_column(String(120))
    resume_content_type: Mapped[str | None] = mapped_column(String(100))
    resume_size: Mapped[int | None] = mapped_column(Integer)
    # The answers to the job's screening questions with their wording (JSON text, null for
    # none), and the question whose answer knocked it out (C21, migration 0030). A knocked-out
    # application the employer does not want emailed has no outbox entry: no copy is sent.
    answers: Mapped[str | None] = mapped_column(Text)
    knocked_out_by: Mapped[str | None] = mapped_column(String(40))

    outbox: Mapped[OutboxEntry | None] = relationship(
        back_populates="application", cascade="all, delete-orphan", lazy="joined"
    )
    # What was reported of its copy after the send (C22), oldest first.
    bounces: Mapped[list[Bounce]] = relationship(
        order_by="Bounce.id", lazy="selectin", viewonly=True
    )
    __table_args__ = (
        Index("ix_applications_employer_received", "employer_id", received_at.desc(), id.desc()),
        # A job's applications, and its feed by (received_at, id) (C10, migration 0009).
        Index("ix_applications_job_received", "job_id", "received_at", "id"),
        {"sqlite_autoincrement": True},
    )


class Resume(Base):
    """Résumé bytes, kept apart so listing applications never loads them (C8)."""

    __tablename__ = "resumes"
    application_id: Mapped[int] = mapped_column(
        ForeignKey("applications.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[bytes] = mapped_column(LargeBinary)


class OutboxEntry(Base):
    """Delivery state of one application's email copy (C8)."""

    __tablename__ = "outbox"
    application_id: Mapped[int] = mapped_column(
        ForeignKey("applications.id", ondelete="CASCADE"), primary_key=True
    )
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    # When an operator last sent a failed copy back (`jobpost outbox retry`): its retries run
    # for DELIVERY_RETRY_HOURS from then. None: from the application's arrival (C8).
    retry_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    application: Mapped[Application] = relationship(back_populates="outbox")
    __table_args__ = (Index("ix_outbox_status_next", "status", "next_attempt_at"),)


class TaskHeartbeat(Base):
    """The last success of a periodic task (C9, models.db.heartbeats), by its Celery name."""

    __tablename__ = "task_heartbeats"
    task: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_success_at: Mapped[datetime] = mapped_column(UTCDateTime)


class JobReport(Base):
    """A fraud report on a job (C13), as the operator reads and resolves it. It outlives
    its job (job_id null then): the operator's record of what was reported."""

    __tablename__ = "job_reports"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    reason: Mapped[str] = mapped_column(String(16))
    details: Mapped[str] = mapped_column(Text)
    email: Mapped[str | None] = mapped_column(String(254))
    status: Mapped[str] = mapped_column(String(12), default="open")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    note: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (
        Index("ix_job_reports_status", "status", "id"),
        Index("ix_job_reports_email", "email"),
    )


class ReportMail(Base):
    """Delivery state of the operator's email of one fraud report (C13): the outbox's
    columns and transitions (models.applications.outbox.REPORTS), keyed by the report."""

    __tablename__ = "report_mails"
    report_id: Mapped[int] = mapped_column(
        ForeignKey("job_reports.id", ondelete="CASCADE"), primary_key=True
    )
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    retry_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (Index("ix_report_mails_status_next", "status", "next_attempt_at"),)


class IdempotencyKey(Base):
    """An Idempotency-Key within its scope (C10): marked while its first request runs (the
    holder's `token`, until `lease_until`), then the response to replay (`status` set), for
    24 hours from `first_used_at`. The request itself is kept only as a hash of its canonical
    form."""

    __tablename__ = "idempotency_keys"
    scope: Mapped[str] = mapped_column(String(16), primary_key=True)  # "employer" or "job"
    scope_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    first_used_at: Mapped[datetime] = mapped_column(UTCDateTime)
    token: Mapped[str] = mapped_column(String(32))
    lease_until: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[int | None] = mapped_column(Integer)  # None: in flight
    location: Mapped[str | None] = mapped_column(Text)
    etag: Mapped[str | None] = mapped_column(String(200))
    content_type: Mapped[str | None] = mapped_column(String(200))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    # The application the recorded response created, so its erasure finds the key (C13).
    application_id: Mapped[int | None] = mapped_column(Integer, index=True)
    __table_args__ = (Index("ix_idempotency_keys_first_used_at", "first_used_at"),)


class WebhookEndpoint(Base):
    """An employer's registered receiver of events (C12). `secret` and `previous_secret` are
    Fernet tokens (models.webhooks.secrets): a copy of the database does not give the signing
    keys."""

    __tablename__ = "webhook_endpoints"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(
        ForeignKey("employers.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[str] = mapped_column(Text)  # JSON list of types, or ["*"]
    description: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(10), default="enabled")  # enabled | disabled
    secret: Mapped[str] = mapped_column(Text)
    previous_secret: Mapped[str | None] = mapped_column(Text)
    previous_secret_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # A deleted endpoint's id must never name a new one (a delivery log would mix them).
    __table_args__ = ({"sqlite_autoincrement": True},)


class WebhookMessage(Base):
    """One event (C12): the body exactly as sent, the same on every attempt and endpoint."""

    __tablename__ = "webhook_messages"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    message_id: Mapped[str] = mapped_column(String(40), unique=True)  # msg_…, webhook-id
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[str] = mapped_column(Text)  # {"type", "timestamp", "data"}
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The application an `application.received` event carries, so its erasure finds it (C13).
    application_id: Mapped[int | None] = mapped_column(Integer, index=True)
    __table_args__ = (
        Index("ix_webhook_messages_employer", "employer_id"),
        {"sqlite_autoincrement": True},
    )


class WebhookDelivery(Base):
    """One message to one endpoint, claimed under a lease like the email outbox (C8, C12)."""

    __tablename__ = "webhook_deliveries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    message_pk: Mapped[int] = mapped_column(
        ForeignKey("webhook_messages.id", ondelete="CASCADE"), index=True
    )
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    # pending | sending | succeeded | failed | cancelled
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # every attempt ever
    step: Mapped[int] = mapped_column(Integer, default=0)  # place in the retry schedule
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # for the purge
    __table_args__ = (
        Index("ix_webhook_deliveries_status_due", "status", "due_at"),
        Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at", "id"),
        # C12's caps: the deliveries in flight, and those waiting for a place (migration 0027).
        Index(
            "ix_webhook_deliveries_sending",
            "endpoint_id",
            "lease_until",
            postgresql_where=text("status = 'sending'"),
            sqlite_where=text("status = 'sending'"),
        ),
        Index(
            "ix_webhook_deliveries_waiting",
            "endpoint_id",
            "id",
            postgresql_where=text("status = 'pending' AND lease_until IS NULL"),
            sqlite_where=text("status = 'pending' AND lease_until IS NULL"),
        ),
        {"sqlite_autoincrement": True},
    )


class SyncRun(Base):
    """A sync run (C11): the employer's jobs sent at once, applied in order by the workers.
    The counts move as items are applied; `claim` names the worker holding the run (its lease
    until `lease_until`), so a worker whose lease ran out can no longer commit an item."""

    __tablename__ = "sync_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    mode: Mapped[str] = mapped_column(String(8))  # upsert, snapshot
    dry_run: Mapped[bool] = mapped_column(Boolean)
    allow_empty: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(10))  # open, queued, running, completed, cancelled
    # The newest job id when the run was made: a snapshot archives only jobs made before it.
    jobs_before: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer, default=0)
    processed: Mapped[int] = mapped_column(Integer, default=0)
    created: Mapped[int] = mapped_column(Integer, default=0)
    updated: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    archived: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claim: Mapped[int] = mapped_column(Integer, default=0)  # claims so far; the holder's number
    released: Mapped[bool] = mapped_column(Boolean, default=True)  # the last holder let go
    __table_args__ = (
        Index("ix_sync_runs_employer_id", "employer_id", id.desc()),  # the list, newest first
        Index("ix_sync_runs_status", "status"),  # the sweeper, the intake's one-at-a-time
        Index("ix_sync_runs_finished_at", "finished_at"),  # the purge
        {"sqlite_autoincrement": True},
    )


class SyncItem(Base):
    """One item of a run (C11): the job body as sent (JSON text), then its outcome. The
    archived jobs of a snapshot follow the items sent, with positions after theirs."""

    __tablename__ = "sync_items"
    run_id: Mapped[int] = mapped_column(
        ForeignKey("sync_runs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    reference_id: Mapped[str] = mapped_column(String(50))
    body: Mapped[str | None] = mapped_column(Text)  # None for an archived job
    outcome: Mapped[str] = mapped_column(String(10))
    job_id: Mapped[int | None] = mapped_column(Integer)
    errors: Mapped[str | None] = mapped_column(Text)  # JSON list; None: empty
    warnings: Mapped[str | None] = mapped_column(Text)  # JSON list; None: empty
    # An update's changed members, {field, from, to} (C11, migration 0032); None: empty.
    changes: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # workers it ended (C11)
    __table_args__ = (
        Index("uq_sync_items_run_reference", "run_id", "reference_id", unique=True),
        Index("ix_sync_items_run_outcome", "run_id", "outcome", "position"),
    )


class SearchNotification(Base):
    """One URL to tell one search engine about (C18): `URL_UPDATED` when a job is published
    or changed, `URL_DELETED` when it leaves the public pages; sent by the workers in batches,
    under a lease like the outbox (models.db.leases). The URL is kept, not the job: a deleted
    job's page must still be named."""

    __tablename__ = "search_notifications"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(10))  # indexnow | google
    url: Mapped[str] = mapped_column(String(2048))
    kind: Mapped[str] = mapped_column(String(12))  # URL_UPDATED | URL_DELETED
    status: Mapped[str] = mapped_column(String(8), default="pending")  # pending sending sent failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # for the purge
    __table_args__ = (
        Index("ix_search_notifications_due", "channel", "status", "next_attempt_at"),
        Index("ix_search_notifications_url", "channel", "url"),
        Index("ix_search_notifications_finished", "finished_at"),
        {"sqlite_autoincrement": True},
    )


class SearchNotificationDay(Base):
    """Requests made to a channel on one UTC day, counted before they are made, so that a
    daily quota (Google's 200 publish requests) is never exceeded (C18)."""

    __tablename__ = "search_notification_days"
    channel: Mapped[str] = mapped_column(String(10), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    requests: Mapped[int] = mapped_column(Integer, default=0)


class AlertSubscription(Base):
    """A job alert (C19): an address subscribed to a search of the public jobs, daily or
    weekly, in its language. `filters` is the search as the search page's query string
    (`models.alerts.filters`), so the search page's filters, old and new, are stored as they are."""

    __tablename__ = "alert_subscriptions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    language: Mapped[str] = mapped_column(String(2))  # en, fr
    frequency: Mapped[str] = mapped_column(String(6))  # daily, weekly
    filters: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(12))  # pending, confirmed, unsubscribed
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unsubscribed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The watermark: jobs that first opened after it (`Job.opened_at`) are the next digest's;
    # set at the confirmation, moved only when a digest is sent (or finds its jobs closed).
    last_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (
        Index("ix_alert_subscriptions_email", "email"),
        Index("ix_alert_subscriptions_due", "state", "frequency", "last_sent_at"),
        # The alerts of one search, which the digests' planner queues together (0023).
        Index("ix_alert_subscriptions_filters", "filters", postgresql_using="hash"),
        {"sqlite_autoincrement": True},
    )


class AlertToken(Base):
    """A link's token of an alert (C19), kept as its SHA-256 only: `confirm` (the opt-in's
    link) or `manage` (the manage page and one-click unsubscribe). Each email gets its own
    manage token, so an old email's link keeps working and no token is ever stored readable."""

    __tablename__ = "alert_tokens"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("alert_subscriptions.id", ondelete="CASCADE"), index=True
    )
    purpose: Mapped[str] = mapped_column(String(8))  # confirm, manage
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AlertMail(Base):
    """An email about an alert (C19), the outbox's third kind: `confirm` (the double opt-in's
    link) or `digest` (the jobs that opened in (`opened_from`, `opened_until`], the range a
    retry sends again). The outbox's columns and transitions (models.applications.outbox),
    keyed by id; the links' tokens are made by the worker as it writes the email, so none is
    kept readable."""

    __tablename__ = "alert_mails"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("alert_subscriptions.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(8))  # confirm, digest
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    retry_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    opened_from: Mapped[datetime | None] = mapped_column(UTCDateTime)  # a digest's range
    opened_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (
        Index("ix_alert_mails_status_next", "status", "next_attempt_at"),
        # One digest under way per alert (migration 0023).
        Index(
            "uq_alert_mails_digest_under_way",
            "subscription_id",
            unique=True,
            postgresql_where=text("kind = 'digest' AND status IN ('pending', 'sending')"),
            sqlite_where=text("kind = 'digest' AND status IN ('pending', 'sending')"),
        ),
        {"sqlite_autoincrement": True},
    )


class Receipt(Base):
    """The applicant's receipt of an application (C20), the outbox's fourth kind: the
    outbox's columns and transitions (models.applications.outbox.RECEIPTS), keyed by id. Its
    status page's token is made by the worker as it writes the email and kept as its SHA-256
    only (`digest`). The row outlives an erasure (`application_id` null, `erased_at` set), so
    the link says the application was erased; it holds nothing of the applicant's."""

    __tablename__ = "receipts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    application_id: Mapped[int | None] = mapped_column(
        ForeignKey("applications.id", ondelete="SET NULL"), unique=True
    )
    digest: Mapped[str | None] = mapped_column(String(64), unique=True)
    language: Mapped[str] = mapped_column(String(2))  # en, fr: the page applied on
    confidential: Mapped[bool] = mapped_column(Boolean)  # the job's, at the application
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    erased_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    retry_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (
        Index("ix_receipts_status_next", "status", "next_attempt_at"),
        {"sqlite_autoincrement": True},
    )


class Bounce(Base):
    """A failure reported for an employer's copy (C22): a delivery status notification that
    `jobpost bounces` received, or the relay refusing the recipient at RCPT. It goes with its
    application (an erasure)."""

    __tablename__ = "bounces"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    application_id: Mapped[int] = mapped_column(ForeignKey("applications.id", ondelete="CASCADE"))
    permanent: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(9))  # RFC 3463: 5.1.1
    reason: Mapped[str] = mapped_column(String(20))  # models.applications.bounces.REASONS
    diagnostic: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(4))  # dsn, smtp
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    __table_args__ = (
        Index("ix_bounces_application", "application_id", "id"),
        {"sqlite_autoincrement": True},
    )


class BounceDrop(Base):
    """What the bounce receiver took and dropped, counted by reason (C22)."""

    __tablename__ = "bounce_drops"
    reason: Mapped[str] = mapped_column(String(20), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    last_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AddressFlag(Base):
    """An employer's application address that hard-bounced (C22): the bounces since the
    employer last cleared it, and when it was flagged (at FLAG_AFTER of them)."""

    __tablename__ = "address_flags"
    employer_id: Mapped[int] = mapped_column(
        ForeignKey("employers.id", ondelete="CASCADE"), primary_key=True
    )
    address: Mapped[str] = mapped_column(String(320), primary_key=True)  # lower-cased
    hard_bounces: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(20))  # the last bounce's
    last_bounce_at: Mapped[datetime] = mapped_column(UTCDateTime)
    flagged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AddressNotice(Base):
    """The email telling an employer's notification address that one of its application
    addresses was flagged (C22), the outbox's fifth kind: the outbox's columns and
    transitions (models.applications.outbox.NOTICES), keyed by id."""

    __tablename__ = "address_notices"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    address: Mapped[str] = mapped_column(String(320))  # the flagged one
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    retry_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (
        Index("ix_address_notices_status_next", "status", "next_attempt_at"),
        {"sqlite_autoincrement": True},
    )


class JobTombstone(Base):
    """A deleted job, as the change feed tells of it (C10): its id and referenceId, and when
    it was deleted (stamped as every change is, `models.db.feed.stamp`), kept for
    CHANGE_FEED_TOMBSTONE_DAYS. Written by the DELETE's own transaction (migration 0032)."""

    __tablename__ = "job_tombstones"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    employer_id: Mapped[int] = mapped_column(ForeignKey("employers.id", ondelete="CASCADE"))
    job_id: Mapped[int] = mapped_column(Integer)  # the job's, gone: no foreign key
    reference_id: Mapped[str | None] = mapped_column(String(50))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    __table_args__ = (
        # The feed's walk by (deleted_at, job_id) from a position, beside the jobs'.
        Index("ix_job_tombstones_employer_deleted", "employer_id", "deleted_at", "job_id"),
        Index("ix_job_tombstones_deleted_at", "deleted_at"),  # the daily purge
        {"sqlite_autoincrement": True},
    )
