"""Warnings: what a successful job write tells the client beside the job (C10).

A warning never refuses a write; it names something the client probably wants to know (a
place chosen among several, a job that closes soon). The codes form a closed list; the
compliance checks of C13 add theirs here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from models.jobs.rows import StoredJob
from models.reference.places import Place

LOCATION_AMBIGUOUS = "location_ambiguous"
LOCATION_ADDED = "location_added"
AUTO_REFRESH_INACTIVE = "auto_refresh_inactive"
CLOSES_SOON = "closes_soon"
ALREADY_CLOSED = "already_closed"
UNDELIVERABLE = "application_email_undeliverable"  # C22

CLOSES_SOON_DAYS = 3  # closeDate today or within the next 3 days
MAX_ALTERNATIVES = 3


@dataclass(frozen=True)
class Warning:  # the contract's name; this module never needs the builtin
    field: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": self.message}


def ordered(warnings: Iterable[Warning]) -> list[Warning]:
    """By field, then by code, both compared as strings (C10)."""
    return sorted(warnings, key=lambda w: (w.field, w.code))


def of_job(job: StoredJob, *, plan: str, today: date) -> list[Warning]:
    """The warnings a job's stored (or would-be stored) state earns, whatever the write
    changed: a client sending an unchanged job learns them too."""
    found: list[Warning] = []
    if job.auto_refresh and plan != "unlimited":
        found.append(
            Warning(
                "autoRefresh",
                AUTO_REFRESH_INACTIVE,
                "autoRefresh is true, but the employer's plan is not unlimited: "
                "the job is not refreshed.",
            )
        )
    if job.status == "active":
        if job.close_date < today:
            found.append(
                Warning(
                    "closeDate",
                    ALREADY_CLOSED,
                    f"closeDate {job.close_date} is before today ({today}): "
                    "the next expiry run archives the job.",
                )
            )
        elif job.close_date <= today + timedelta(days=CLOSES_SOON_DAYS):
            found.append(
                Warning(
                    "closeDate",
                    CLOSES_SOON,
                    f"closeDate {job.close_date} is within {CLOSES_SOON_DAYS} days: "
                    "the job is archived the day after.",
                )
            )
    return found


def ambiguous(field: str, written: str, chosen: Place, others: list[Place]) -> Warning:
    """A description that named several places: the chosen one and up to 3 others, each as
    a client can write it (with its id where its description is shared, as two Vanier, ON)."""
    shown = others[:MAX_ALTERNATIVES]
    shared = {p.description for p in [chosen, *others]}
    counts = {d: sum(p.description == d for p in [chosen, *others]) for d in shared}

    def writable(place: Place) -> str:
        if counts[place.description] > 1:
            return f'{{"id": {place.id}, "description": "{place.description}"}}'
        return place.description

    return Warning(
        f"{field}.description",
        LOCATION_AMBIGUOUS,
        f"{written.strip()!r} names {len(others) + 1} places; {writable(chosen)} was chosen. "
        f"To name another, write {' or '.join(writable(p) for p in shown)}.",
    )


def added(field: str, place: Place, *, dry_run: bool) -> Warning:
    verb = "would be added" if dry_run else "was added"
    return Warning(
        f"{field}.description",
        LOCATION_ADDED,
        f"{place.description} was not in the locations list and {verb} to it.",
    )


def undeliverable(address: str) -> Warning:
    """The job's applicationEmail hard-bounced again and again (C22): copies are not arriving."""
    return Warning(
        "applicationEmail",
        UNDELIVERABLE,
        f"{address} keeps bouncing: copies of applications sent to it are not delivered. "
        "Use another address, or route applications by applicationUrl.",
    )
