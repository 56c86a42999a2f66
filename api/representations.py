"""Answer shapes: exactly the members docs/reference.md lists for each, made from the values
models returns (C3, C4, C6, C8, C11, C12, C13); the `jobpost` commands print the same ones
(C14). This module is also the process's webhook payloads (models.webhooks.payloads), so an
event's data is the answer's shape by construction (C12)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Row

from models import keys
from models.applications.privacy import Export
from models.core.dates import timestamp
from models.db.entities import (
    AddressFlag,
    AlertSubscription,
    ApiKey,
    Application,
    Bounce,
    Category,
    Employer,
    Location,
    PositionType,
    WebhookEndpoint,
)
from models.employers import Access
from models.jobs import digest as job_digest
from models.jobs import questions, workplace
from models.jobs.listing import Header
from models.jobs.rows import StoredJob
from models.jobs.tombstones import Deleted
from models.reference.lists import (
    CATEGORY_NAMES,
    POSITION_TYPE_NAMES,
    ROUTING_TYPES,
    SALARY_PERIOD_NAMES,
)
from models.reference.places import Place
from models.reports import Shown
from models.webhooks.delivery_log import DeliveryRow


def number(value: Decimal | None) -> int | float | None:
    """An amount as a JSON number, at most 2 decimals, no trailing zeros (C4)."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def location(loc: Location | Place) -> dict[str, Any]:
    """A place: a Location, or a Place (a job's, a list's `models.jobs.writes.Header`)."""
    return {
        "id": loc.id,
        "name": loc.name,
        "description": loc.description,
        "type": loc.type,
        "latitude": loc.latitude,
        "longitude": loc.longitude,
    }


def named(item: Category | PositionType) -> dict[str, Any]:
    return {"id": item.id, "name": item.name}


def salary(job: StoredJob) -> dict[str, Any] | None:
    period = job.salary_period_id
    if job.salary_amount is None or period is None:
        return None
    name, unit = SALARY_PERIOD_NAMES[period]
    return {
        "amount": number(job.salary_amount),
        "maxAmount": number(job.salary_max),
        "period": {"id": period, "name": name, "unit": unit},
        "plusCommission": job.salary_commission,
    }


def header(job: Header, employer: Access) -> dict[str, Any]:
    """A list element: the job header of the interface."""
    return {
        "id": job.id,
        "referenceId": job.reference_id,
        "employer": {"id": employer.employer_id, "name": employer.employer_name},
        "title": job.title,
        "publishDate": job.publish_date,
        "locations": [location(loc) for loc in job.locations],
        "workplaceType": job.workplace_type,
        "applicantLocations": workplace.listed(job.workplace_type, job.applicant_locations),
        "questions": questions.listed(job.questions),
        "confidential": job.confidential,
        "status": job.status,
        "updatedAt": timestamp(job.updated_at),
    }


def change(item: Header | Deleted, employer: Access) -> dict[str, Any]:
    """An element of the change feed (C10): a job's header, or a deleted job's tombstone,
    its `updatedAt` the time of the deletion."""
    if isinstance(item, Header):
        return header(item, employer)
    return {
        "id": item.id,
        "referenceId": item.reference_id,
        "deleted": True,
        "updatedAt": timestamp(item.deleted_at),
    }


def job(j: StoredJob, employer_name: str) -> dict[str, Any]:
    """The complete job in read shape, including employer, names and units. A job that a
    dry run would create has no id yet (0): null (C10)."""
    assert j.locations is not None and j.category_ids is not None
    return {
        "id": j.id or None,
        "referenceId": j.reference_id,
        "employer": {"id": j.employer_id, "name": employer_name},
        "title": j.title,
        "publishDate": j.publish_date,
        "closeDate": j.close_date,
        "confidential": j.confidential,
        "autoRefresh": j.auto_refresh,
        "status": j.status,
        "locations": [location(loc) for loc in j.locations],
        "workplaceType": j.workplace_type,
        "applicantLocations": workplace.listed(j.workplace_type, j.applicant_locations),
        "categories": [{"id": c, "name": CATEGORY_NAMES[c]} for c in j.category_ids],
        "positionType": {"id": j.position_type_id, "name": POSITION_TYPE_NAMES[j.position_type_id]},
        "salary": salary(j),
        "description": j.description,
        "applicantRoutingType": {"id": j.routing_type, "name": ROUTING_TYPES[j.routing_type]},
        "applicationEmail": j.application_email,
        "applicationUrl": j.application_url,
        "language": j.language,
        "translation": translation(j),
        "updatedAt": timestamp(j.updated_at),
        "aiScreening": j.ai_screening,
        "existingVacancy": j.existing_vacancy,
        "takenDown": j.taken_down,
        "questions": questions.listed(j.questions),
    }


def digest(parts: list[job_digest.Status]) -> dict[str, Any]:
    """GET /jobs/digest (C24): each status's count and hash."""
    return {"statuses": [{"status": p.status, **_part(p.whole)} for p in parts]}


def status_digest(part: job_digest.Status) -> dict[str, Any]:
    """GET /jobs/digest?status= (C24): the status's count and hash, and its buckets that
    hold jobs."""
    buckets = [{"bucket": b, **_part(p)} for b, p in part.buckets.items()]
    return {"status": part.status, **_part(part.whole), "buckets": buckets}


def bucket_digest(
    status: str, bucket: int, whole: job_digest.Part, jobs: list[job_digest.Held]
) -> dict[str, Any]:
    """GET /jobs/digest?status=&bucket= (C24): the bucket's count, hash and jobs."""
    listed = [{"referenceId": h.reference_id, "id": h.id, "etag": h.etag} for h in jobs]
    return {"status": status, "bucket": bucket, **_part(whole), "jobs": listed}


def _part(part: job_digest.Part) -> dict[str, Any]:
    return {"count": part.count, "hash": part.hash}


# Members a write never changes, or that every stored change moves: not in `changes`.
_NOT_CHANGES = ("id", "employer", "updatedAt")


def changes(
    stored: StoredJob | None, written: StoredJob, employer_name: str
) -> list[dict[str, Any]]:
    """What a write changes (C10): each member of the read shape whose value differs between
    the job as stored and as written, `{"field", "from", "to"}`, in the shape's order; none
    for a create (`stored` None) or an unchanged write."""
    if stored is None:
        return []
    before, after = job(stored, employer_name), job(written, employer_name)
    return [
        {"field": name, "from": before[name], "to": value}
        for name, value in after.items()
        if name not in _NOT_CHANGES and before[name] != value
    ]


def translation(j: StoredJob) -> dict[str, str] | None:
    """The job's title and description in the other language (C13), or null."""
    if j.translation_title is None or j.translation_description is None:
        return None
    return {"title": j.translation_title, "description": j.translation_description}


def job_event(job: Header, employer: Access, close_date: date | None) -> dict[str, Any]:
    """A job event's data (C12): the list element, and `closeDate` for `job.expiring`."""
    element = header(job, employer)
    return element if close_date is None else {**element, "closeDate": close_date}


def sync_run(run: Row[Any]) -> dict[str, Any]:
    """The sync resource (C11): the API's, the CLI's and `sync.completed`'s data."""
    return {
        "id": run.id,
        "mode": run.mode,
        "dryRun": run.dry_run,
        "status": run.status,
        "total": run.total,
        "processed": run.processed,
        "created": run.created,
        "updated": run.updated,
        "unchanged": run.unchanged,
        "archived": run.archived,
        "failed": run.failed,
        "createdAt": timestamp(run.created_at),
        "startedAt": timestamp(run.started_at),
        "finishedAt": timestamp(run.finished_at),
    }


def sync_item(row: Row[Any]) -> dict[str, Any]:
    """A run's item (C11): its outcome, and the errors and warnings kept as JSON text."""
    return {
        "referenceId": row.reference_id,
        "outcome": row.outcome,
        "jobId": row.job_id,
        "errors": json.loads(row.errors) if row.errors else [],
        "warnings": json.loads(row.warnings) if row.warnings else [],
        "changes": json.loads(row.changes) if row.changes else [],
    }


def endpoint(e: WebhookEndpoint, secret: str | None = None) -> dict[str, Any]:
    """A webhook endpoint (C12); the secret only in the answer that made it."""
    body: dict[str, Any] = {
        "id": e.id,
        "url": e.url,
        "events": json.loads(e.events),
        "description": e.description,
        "status": e.status,
        "createdAt": timestamp(e.created_at),
    }
    if secret is not None:
        body["secret"] = secret
    return body


def delivery(d: DeliveryRow) -> dict[str, Any]:
    """An entry of an endpoint's delivery log (C12)."""
    return {
        "id": d.message_id,
        "event": d.event,
        "status": d.status,
        "attempts": d.attempts,
        "lastStatusCode": d.last_status_code,
        "lastError": d.last_error,
        "createdAt": timestamp(d.created_at),
        "deliveredAt": timestamp(d.delivered_at),
    }


def application(a: Application) -> dict[str, Any]:
    """The employer's view of an application (C8): the API's, `application.received`'s and
    the privacy export's (C13)."""
    resume = None
    if a.resume_filename:
        resume = {
            "filename": a.resume_filename,
            "size": a.resume_size,
            "contentType": a.resume_content_type,
        }
    copy = a.outbox  # None: knocked out, and its employer has it stored only (C21)
    return {
        "id": a.id,
        "jobId": a.job_id,
        "name": a.name,
        "email": a.email,
        "phone": a.phone,
        "coverLetter": a.cover_letter,
        "receivedAt": timestamp(a.received_at),
        "resume": resume,
        "status": None if copy is None else copy.status,
        "attempts": 0 if copy is None else copy.attempts,
        "sentAt": None if copy is None else timestamp(copy.sent_at),
        "lastError": None if copy is None else copy.last_error,
        "answers": answers(a.answers),
        "knockedOut": a.knocked_out_by is not None,
        "knockedOutBy": a.knocked_out_by,
        "bounce": bounce(a.bounces[-1]) if a.bounces else None,
    }


def answers(stored: str | None) -> list[dict[str, Any]]:
    """An application's answers (C21): each question's id and wording, and the answer."""
    return [
        {"questionId": e["questionId"], "question": e["question"], "answer": e["answer"]}
        for e in questions.answers_of(stored)
    ]


def bounce(b: Bounce) -> dict[str, Any]:
    """The last failure reported of a copy after its send (C22)."""
    return {
        "permanent": b.permanent,
        "status": b.status,
        "reason": b.reason,
        "diagnostic": b.diagnostic,
        "source": b.source,
        "receivedAt": timestamp(b.received_at),
    }


def api_key(k: ApiKey) -> dict[str, Any]:
    """A key as GET /keys lists it (C23): never its secret."""
    return {
        "id": k.id,
        "prefix": k.prefix,
        "description": k.description,
        "scopes": keys.scopes_of(k),
        "createdAt": timestamp(k.created_at),
        "expiresAt": timestamp(k.expires_at),
        "lastUsedAt": timestamp(k.last_used_at),
    }


def issued_key(k: ApiKey, secret: str) -> dict[str, Any]:
    """A key just made (POST /keys, a rotation): the key, and its secret, shown this once."""
    return {**api_key(k), "key": secret}


def flagged_address(flag: AddressFlag) -> dict[str, Any]:
    """A flagged application address, as GET /employer lists it (C22)."""
    return {
        "address": flag.address,
        "hardBounces": flag.hard_bounces,
        "reason": flag.reason,
        "lastBounceAt": timestamp(flag.last_bounce_at),
        "flaggedAt": timestamp(flag.flagged_at),
    }


def address_flagged(flag: AddressFlag, jobs: list[Any]) -> dict[str, Any]:
    """`employer.address_flagged`'s data (C22): the address, and the jobs that use it."""
    return {**flagged_address(flag), "jobIds": [j.id for j in jobs]}


def report(r: Shown) -> dict[str, Any]:
    """A fraud report as `jobpost reports` prints it (C13)."""
    return {
        "id": r.id,
        "jobId": r.job_id,
        "reason": r.reason,
        "details": r.details,
        "email": r.email,
        "status": r.status,
        "createdAt": reported_at(r.created_at),
        "resolvedAt": None if r.resolved_at is None else reported_at(r.resolved_at),
        "note": r.note,
    }


def reported_at(moment: datetime) -> str:
    """A report's instants as `jobpost reports` has always printed them: ISO 8601 with the
    microseconds, not `timestamp`'s milliseconds (the report is no API answer; C14)."""
    return moment.isoformat().replace("+00:00", "Z")


def export(found: Export) -> dict[str, Any]:
    """Everything held for an address (C13, C14): its applications (résumés as metadata),
    their deliveries (`kind` `email` for the copy, `webhook` for `application.received`'s)
    the fraud reports it made and its job alerts (C19)."""
    copies: list[dict[str, Any]] = [
        {
            "kind": "email",
            "applicationId": a.id,
            "to": a.application_email,
            "status": a.outbox.status,
            "attempts": a.outbox.attempts,
            "sentAt": timestamp(a.outbox.sent_at),
            "lastError": a.outbox.last_error,
        }
        for a in found.applications
        if a.outbox is not None  # a knocked-out application kept from the mail (C21)
    ]
    sent = [
        {
            "kind": "webhook",
            "applicationId": r.application_id,
            "webhookId": r.endpoint_id,
            **delivery(r.delivery),
        }
        for r in found.webhook_deliveries
    ]
    return {
        "email": found.email,
        "applications": [application(a) for a in found.applications],
        "deliveries": copies + sent,
        "reports": [report(r) for r in found.reports],
        "alerts": [alert(s) for s in found.alerts],
    }


def alert(s: AlertSubscription) -> dict[str, Any]:
    """A job alert as the privacy export shows it (C13, C19); its tokens are never shown."""
    return {
        "id": s.id,
        "email": s.email,
        "language": s.language,
        "frequency": s.frequency,
        "filters": s.filters,
        "state": s.state,
        "createdAt": timestamp(s.created_at),
        "confirmedAt": timestamp(s.confirmed_at),
        "unsubscribedAt": timestamp(s.unsubscribed_at),
        "lastSentAt": timestamp(s.last_sent_at),
    }


def employer(e: Employer) -> dict[str, Any]:
    """The employer as GET /employer and `jobpost employers set` show it (C13)."""
    return {
        "id": e.id,
        "name": e.name,
        "plan": e.plan,
        "language": e.language,
        "compliance": e.compliance,
        "ontario25Plus": e.ontario25_plus,
        "emailKnockedOut": e.email_knocked_out,
        "notificationEmail": e.notification_email,
        "flaggedAddresses": [flagged_address(f) for f in e.flagged_addresses],
    }
