"""The jobs of the sync bench (issue 16): what an applicant-tracking system keeps in step.

Ten thousand distinct jobs, each as `PUT /api/v1.1/jobs` takes it (C4's write shape with a
referenceId): a distinct title, a description of a few hundred words that names the job and
its place, 1 to 3 places among the most populous listed cities of several provinces, a
category or two, a salary for most. The same bodies go out as a PUT loop and as a sync run's
items (C11), so both sides of each ratio write the same jobs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, text

from bench.bodies import description
from bench.words import ROLES, SENIORITY, SPECIALTIES

RANDOM_SEED = 20261128
PLACES = 300  # the most populous listed cities: 11 provinces and territories on the bench's data
REF_PREFIX = "SYNC"
QUALIFIERS = (
    "", "", "", "Night Shift", "Evenings", "Weekends", "Part Time", "Contract", "Temporary",
    "Bilingual", "Hybrid", "Remote", "Level II", "Level III", "Team Lead", "Seasonal",
)  # fmt: skip
TEAMS = (
    "head office", "distribution centre", "north branch", "south branch", "east plant",
    "west clinic", "downtown store", "airport site", "service centre", "regional office",
)  # fmt: skip
# A job's places: one for most, two or three for some (C4 allows 1 to 3).
PLACE_COUNTS = (1,) * 6 + (2,) * 3 + (3,)
POSITION_TYPES = (1,) * 6 + (2,) * 2 + (3, 4)


@dataclass(frozen=True)
class Place:
    description: str  # "Kelowna, BC", as an ATS writes it (C3)
    province: str


def places(connection: Connection, count: int = PLACES) -> list[Place]:
    """The `count` most populous listed cities of the database's locations list."""
    rows = connection.execute(
        text(
            "SELECT description, province_code FROM locations WHERE listed AND type = 'City' "
            "ORDER BY population DESC, id LIMIT :n"
        ),
        {"n": count},
    ).all()
    return [Place(d, p) for d, p in rows]


def jobs(
    pool: Sequence[Place], count: int = 10_000, *, prefix: str = REF_PREFIX, status: str = "active"
) -> list[dict[str, Any]]:
    """`count` distinct jobs (titles, descriptions and referenceIds all distinct), the same
    for the same arguments."""
    rng = random.Random(RANDOM_SEED)
    titles: set[str] = set()
    bodies = []
    for n in range(1, count + 1):
        title = _title(rng)
        while title in titles:
            title = _title(rng)
        titles.add(title)
        where = rng.sample(pool, rng.choice(PLACE_COUNTS))
        reference = f"{prefix}-{n:06d}"
        # The first paragraph names this job, so no two descriptions are the same.
        intro = (
            f"<p>{title}, {where[0].description}, requisition {reference}: join our "
            f"{rng.choice(TEAMS)} and help us serve customers across "
            f"{len({p.province for p in where})} province(s).</p>"
        )
        body: dict[str, Any] = {
            "referenceId": reference,
            "title": title,
            "status": status,
            "description": intro + description(rng),
            "locations": [{"description": p.description} for p in where],
            "categories": [{"id": c} for c in rng.sample(range(1, 31), rng.choice((1, 1, 2)))],
            "positionType": {"id": rng.choice(POSITION_TYPES)},
            "applicantRoutingType": {"id": 1},
            "applicationEmail": f"careers+{n % 97}@northwind.test",
        }
        roll = rng.random()
        if roll < 0.6:
            amount = 40_000 + 1_000 * rng.randrange(80)
            body["salary"] = {"amount": amount, "maxAmount": amount + 10_000, "period": {"id": 1}}
        elif roll < 0.8:
            body["salary"] = {"amount": 17 + rng.randrange(25), "period": {"id": 5}}
        bodies.append(body)
    return bodies


def _title(rng: random.Random) -> str:
    words = (rng.choice(SENIORITY), rng.choice(SPECIALTIES), rng.choice(ROLES))
    title = " ".join(w for w in words if w)
    qualifier = rng.choice(QUALIFIERS)
    return f"{title} ({qualifier})" if qualifier else title


def changed(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same jobs, each with one more sentence in its description: a run of updates."""
    more = "<p>Updated: interviews start next month.</p>"
    return [b | {"description": b["description"] + more} for b in bodies]


def padded(bodies: Sequence[dict[str, Any]], size: int, *, prefix: str) -> list[dict[str, Any]]:
    """The same jobs under other referenceIds, their descriptions lengthened so that
    `{"jobs": [...]}` of them encodes to about `size` bytes (within a few per job)."""
    renamed = [b | {"referenceId": f"{prefix}-{i:06d}"} for i, b in enumerate(bodies, 1)]
    base = len(json.dumps({"jobs": renamed}))
    extra = (size - base) // max(len(renamed), 1) - len("<p></p>")
    if extra <= 0:
        return renamed
    filler = "We hire across Canada and welcome applicants from every background. "
    paragraph = "<p>" + (filler * (extra // len(filler) + 1))[:extra] + "</p>"
    return [b | {"description": b["description"] + paragraph} for b in renamed]
