"""Bodies of valid requests, to be broken one rule at a time by the tests."""

from __future__ import annotations

from typing import Any


def job_body(**overrides: Any) -> dict[str, Any]:
    """A valid write-shape body (POST), every required property present."""
    body: dict[str, Any] = {
        "title": "Senior Baker",
        "locations": [{"description": "Toronto, ON"}],
        "categories": [{"id": 12}],
        "positionType": {"id": 1},
        "description": "<p>Bake <strong>bread</strong>.</p>",
        "applicantRoutingType": {"id": 1},
        "applicationEmail": "jobs@maple.test",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}
