"""Job events pushed to webhooks (C12): `job.created`, `job.updated` and `job.deleted` from
the writes (the API's one by one, a sync run's a batch at a time), `job.expired` and
`job.refreshed` from upkeep's set-based changes, and the daily `job.expiring` scan. Each
batch costs a fixed number of statements whatever its size: who listens, the headers of the
jobs (a write has them), then emit_batch.

The data is exactly a job list element (the API's own serializer, installed as
models.webhooks.payloads, so a member added to list elements is added here too), plus
`closeDate` where C12 says.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import Integer, and_, bindparam, null, select
from sqlalchemy.orm import Session

from models.db.entities import Employer, Job, JobLocation, Location
from models.db.fast_reads import Precompiled
from models.employers import Access
from models.jobs import listing as job_listing
from models.jobs.listing import Header
from models.jobs.rows import StoredJob
from models.jobs.tombstones import Deleted
from models.webhooks import messages as webhook_messages
from models.webhooks import payloads
from models.webhooks.tables import ENDPOINTS, MESSAGES

EXPIRING_DAYS = 3  # closeDate today or within the next 3 days (C12)


def listening(session: Session, employer_ids: set[int], type: str) -> set[int]:
    """The employers among these with an enabled endpoint that takes `type`."""
    if not employer_ids:
        return set()
    e = ENDPOINTS.c
    found = session.scalars(
        select(e.employer_id)
        .where(
            e.employer_id.in_(employer_ids),
            e.status == "enabled",
            webhook_messages.subscribed(type),
        )
        .distinct()
    )
    return set(found)


WRITTEN = ("job.created", "job.updated", "job.deleted")


def heard(session: Session, employer_id: int) -> frozenset[str]:
    """Which of a write's events (`WRITTEN`) the employer's enabled endpoints take: one
    statement on the driver, as every API write asks it."""
    found = _endpoint_events().all(session.connection(), {"employer_id": employer_id})
    return frozenset(
        t for t in WRITTEN if any(webhook_messages.subscribes(events, t) for (events,) in found)
    )


@functools.cache
def _endpoint_events() -> Precompiled:
    e = ENDPOINTS.c
    return Precompiled(
        select(e.events).where(
            e.employer_id == bindparam("employer_id", type_=Integer), e.status == "enabled"
        )
    )


def header_of(job: StoredJob) -> Header:
    """A written job's list header, from the job itself (no read)."""
    assert job.updated_at is not None  # written: stamped
    return Header(
        job.id,
        job.reference_id,
        job.title,
        job.publish_date,
        job.confidential,
        job.status,
        job.workplace_type,
        job.applicant_locations,
        job.questions,
        job.updated_at,
        list(job.locations or ()),
    )


def _as(employer_id: int, name: str) -> Access:
    return Access(employer_id, name, plan="", created_at=datetime.min)  # id and name only


def written(
    session: Session,
    employer_id: int,
    employer_name: str,
    *,
    created: Sequence[StoredJob] = (),
    updated: Sequence[tuple[StoredJob, StoredJob]] = (),
    deleted: Sequence[Deleted] = (),
    now: datetime,
    ears: frozenset[str] | None = None,
) -> list[str]:
    """`job.created` for `created`, `job.updated` for the (stored, written) pairs with the
    members that changed (`changes`, C12), `job.deleted` for `deleted`, in the writes' own
    transaction: one statement when no endpoint of the employer takes any of them, then two
    a type taken. `updated`'s stored jobs are whole (their arrays read). `ears`: `heard`,
    when the caller asked it already. The message ids."""
    if not (created or updated or deleted):
        return []
    if ears is None:
        ears = heard(session, employer_id)
    if not ears:
        return []
    render, access, ids = payloads.installed(), _as(employer_id, employer_name), []
    events: dict[str, list[tuple[int, Any]]] = {
        "job.created": [
            (employer_id, render.job_event(header_of(j), access, None)) for j in created
        ],
        "job.updated": [
            (
                employer_id,
                {
                    **render.job_event(header_of(w), access, None),
                    "changes": render.changes(s, w, employer_name),
                },
            )
            for s, w in updated
        ],
        "job.deleted": [(employer_id, render.change(d, access)) for d in deleted],
    }
    for type, made in events.items():
        if made and type in ears:
            ids += webhook_messages.emit_batch(
                session, type, made, now=now, listening={employer_id}
            )
    return ids


def headers(session: Session, job_ids: Sequence[int]) -> dict[int, tuple[Header, Access]]:
    """Each job's list header and its employer, read in one statement (a row per location)."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(
            null(),
            null(),
            null(),
            Job.id,
            *job_listing.HEADER,
            *job_listing.PLACE,
            Employer.id.label("employer_id"),
            Employer.name.label("employer_name"),
        )
        .join(Employer, Employer.id == Job.employer_id)
        .outerjoin(JobLocation, JobLocation.job_id == Job.id)
        .outerjoin(Location, Location.id == JobLocation.location_id)
        .where(Job.id.in_(job_ids))
        .order_by(Job.id, JobLocation.position)
    ).all()
    employer = {row[job_listing.ID_AT]: (row.employer_id, row.employer_name) for row in rows}
    found: dict[int, tuple[Header, Access]] = {}
    for h in job_listing.headers_of([tuple(row) for row in rows]):
        employer_id, name = employer[h.id]
        # The serializer reads the employer's id and name only.
        found[h.id] = (h, Access(employer_id, name, plan="", created_at=datetime.min))
    return found


def announce(
    session: Session,
    type: str,
    changed: Sequence[Any],
    *,
    now: datetime,
    close_date: bool = False,
    message_ids: list[str] | None = None,
) -> list[str]:
    """Emit `type` for `changed` rows (`id`, `employer_id`, and `close_date` if asked):
    only for employers that listen, so a batch nobody hears costs one statement."""
    ears = listening(session, {row.employer_id for row in changed}, type)
    heard = [row for row in changed if row.employer_id in ears]
    if not heard:
        return []
    described = headers(session, [row.id for row in heard])
    render = payloads.installed().job_event
    events = [
        (row.employer_id, render(*described[row.id], row.close_date if close_date else None))
        for row in heard
    ]
    ids = None
    if message_ids is not None:
        by_job = dict(zip([row.id for row in changed], message_ids, strict=True))
        ids = [by_job[row.id] for row in heard]
    return webhook_messages.emit_batch(session, type, events, now=now, message_ids=ids)


def expiring_message_id(job_id: int, close_date: date) -> str:
    """The id of a job's `job.expiring` message for one closeDate: the same for every scan,
    so the message itself records that it was emitted (at most once per job and closeDate).
    Hashed, so it looks like any other id and says nothing of the job."""
    digest = hashlib.sha256(f"job.expiring:{job_id}:{close_date.isoformat()}".encode()).digest()
    return "msg_" + base64.urlsafe_b64encode(digest[:18]).decode()


def scan_expiring(session: Session, *, today: date, now: datetime) -> list[str]:
    """`job.expiring` for active jobs closing today..today+3 that have had none for their
    closeDate (C12). Run after expiry and refresh; overlapping scans take turns (upkeep)."""
    soon = and_(
        Job.status == "active",
        Job.close_date >= today,
        Job.close_date <= today + timedelta(days=EXPIRING_DAYS),
    )
    candidates = session.execute(
        select(Job.id, Job.employer_id, Job.close_date).where(soon).order_by(Job.id)
    ).all()
    ears = listening(session, {row.employer_id for row in candidates}, "job.expiring")
    wanted = {
        expiring_message_id(row.id, row.close_date): row
        for row in candidates
        if row.employer_id in ears
    }
    if not wanted:
        return []
    m = MESSAGES.c
    done = set(session.scalars(select(m.message_id).where(m.message_id.in_(list(wanted)))))
    due = [row for mid, row in wanted.items() if mid not in done]
    ids = [expiring_message_id(row.id, row.close_date) for row in due]
    return announce(session, "job.expiring", due, now=now, close_date=True, message_ids=ids)
