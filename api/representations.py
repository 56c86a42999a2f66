"""Read shapes: exactly the members docs/reference.md lists for each (C3, C4, C6)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from models.employers import Access
from models.entities import Category, Job, Location, PositionType
from models.jobs import Header
from models.reference import ROUTING_TYPES


def number(value: Decimal | None) -> int | float | None:
    """An amount as a JSON number, at most 2 decimals, no trailing zeros (C4)."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def location(loc: Location | Any) -> dict[str, Any]:
    """A place: a Location, or a row of the same names (`models.jobs.Header`)."""
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


def salary(job: Job) -> dict[str, Any] | None:
    period = job.salary_period
    if job.salary_amount is None or period is None:
        return None
    return {
        "amount": number(job.salary_amount),
        "maxAmount": number(job.salary_max),
        "period": {"id": period.id, "name": period.name, "unit": period.unit},
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
        "confidential": job.confidential,
        "status": job.status,
    }


def job(j: Job) -> dict[str, Any]:
    """The complete job in read shape, including employer, names and units."""
    return {
        "id": j.id,
        "referenceId": j.reference_id,
        "employer": {"id": j.employer.id, "name": j.employer.name},
        "title": j.title,
        "publishDate": j.publish_date,
        "closeDate": j.close_date,
        "confidential": j.confidential,
        "autoRefresh": j.auto_refresh,
        "status": j.status,
        "locations": [location(loc) for loc in j.locations],
        "categories": [named(c) for c in j.categories],
        "positionType": named(j.position_type),
        "salary": salary(j),
        "description": j.description,
        "applicantRoutingType": {"id": j.routing_type, "name": ROUTING_TYPES[j.routing_type]},
        "applicationEmail": j.application_email,
        "applicationUrl": j.application_url,
    }
