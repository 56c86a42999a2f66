"""Read shapes: exactly the members docs/reference.md lists for each (C3, C4, C6)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from models.db.entities import Category, Location, PositionType
from models.employers import Access
from models.jobs import workplace
from models.jobs.listing import Header
from models.jobs.rows import StoredJob
from models.reference.lists import (
    CATEGORY_NAMES,
    POSITION_TYPE_NAMES,
    ROUTING_TYPES,
    SALARY_PERIOD_NAMES,
)
from models.reference.places import Place


def timestamp(moment: datetime | None) -> str | None:
    """An instant as the service answers every one (C10): RFC 3339 in UTC, with `Z` and
    milliseconds (`2026-11-25T15:05:09.962Z`). Truncated, never rounded up: an `updatedSince`
    or `receivedSince` copied from an answer still finds the thing it was copied from."""
    if moment is None:
        return None
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


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
        "confidential": job.confidential,
        "status": job.status,
        "updatedAt": timestamp(job.updated_at),
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
    }


def translation(j: StoredJob) -> dict[str, str] | None:
    """The job's title and description in the other language (C13), or null."""
    if j.translation_title is None or j.translation_description is None:
        return None
    return {"title": j.translation_title, "description": j.translation_description}
