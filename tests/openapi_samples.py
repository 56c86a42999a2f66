"""What the tests of api/openapi.json share: the endpoints it must document, a job as the API
answers it, and walking the document and its references."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.openapi_check import (
    document,
)

V = "/api/v1.1"
PROBLEM = "application/problem+json"
JSON = "application/json"
HTML = "text/html"
KEYED: dict[str, list[str]] = {"ApiKey": []}

# The eight job operations of the v1.1 interface, then C3, C8 and C9 (docs/reference.md).
ENDPOINTS = [
    ("get", f"{V}/jobs/{{id}}"),
    ("get", f"{V}/jobs/digest"),
    ("post", f"{V}/jobs"),
    ("put", f"{V}/jobs/{{id}}"),
    ("put", f"{V}/jobs"),
    ("delete", f"{V}/jobs/{{id}}"),
    ("delete", f"{V}/jobs"),
    ("get", f"{V}/jobs"),
    ("get", f"{V}/positiontypes"),
    ("get", f"{V}/categories"),
    ("get", f"{V}/locations"),
    ("get", f"{V}/locations/{{id}}"),
    ("post", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/jobs/{{id}}/applications"),
    ("get", f"{V}/applications"),
    ("get", f"{V}/applications/{{id}}"),
    ("delete", f"{V}/applications/{{id}}"),
    ("get", f"{V}/applications/{{id}}/resume"),
    ("get", f"{V}/employer"),
    ("put", f"{V}/employer"),
    ("delete", f"{V}/employer/flagged-addresses/{{address}}"),
    ("post", f"{V}/jobs/{{id}}/reports"),
    ("get", f"{V}/openapi.json"),
    ("post", f"{V}/webhooks"),
    ("get", f"{V}/webhooks"),
    ("get", f"{V}/webhooks/{{id}}"),
    ("put", f"{V}/webhooks/{{id}}"),
    ("delete", f"{V}/webhooks/{{id}}"),
    ("post", f"{V}/webhooks/{{id}}/secret"),
    ("post", f"{V}/webhooks/{{id}}/test"),
    ("get", f"{V}/webhooks/{{id}}/deliveries"),
    ("post", f"{V}/webhooks/{{id}}/deliveries/{{messageId}}/retry"),
    ("get", f"{V}/keys"),
    ("post", f"{V}/keys"),
    ("get", f"{V}/keys/{{id}}"),
    ("delete", f"{V}/keys/{{id}}"),
    ("post", f"{V}/keys/{{id}}/rotate"),
    ("get", "/jobs/{id}"),
    ("get", "/jobs/{id}/apply"),
    ("post", "/jobs/{id}/apply"),
    ("get", "/jobs/{id}/applied"),
    ("get", "/jobs/{id}/report"),
    ("post", "/jobs/{id}/report"),
    ("get", "/jobs/{id}/reported"),
    ("get", "/policies/job-fraud"),
    ("get", "/policies/privacy"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("post", f"{V}/syncs"),
    ("get", f"{V}/syncs"),
    ("get", f"{V}/syncs/{{id}}"),
    ("post", f"{V}/syncs/{{id}}/jobs"),
    ("post", f"{V}/syncs/{{id}}/start"),
    ("post", f"{V}/syncs/{{id}}/cancel"),
    ("get", f"{V}/syncs/{{id}}/items"),
    ("get", "/"),
    ("get", "/jobs"),
    ("get", "/robots.txt"),
    ("get", "/sitemap.xml"),
    ("get", "/sitemaps/jobs-{n}.xml"),
    ("get", "/feeds/jobs.json"),
    ("get", "/feeds/jobs.atom"),
    ("get", "/feeds/indeed.xml"),
    ("get", "/alerts/new"),
    ("post", "/alerts/new"),
    ("get", "/alerts/sent"),
    ("get", "/alerts/confirm/{token}"),
    ("post", "/alerts/confirm/{token}"),
    ("get", "/alerts/manage/{token}"),
    ("post", "/alerts/manage/{token}"),
    ("get", "/alerts/unsubscribe/{token}"),
    ("post", "/alerts/unsubscribe/{token}"),
    ("get", "/applications/status/{token}"),
    ("post", "/applications/status/{token}/erase"),
]


JOB: dict[str, Any] = {
    "id": 42,
    "referenceId": "REQ-2024-17",
    "employer": {"id": 1, "name": "Érable Comptabilité inc."},
    "title": "Senior accountant",
    "publishDate": "2025-05-01",
    "closeDate": "2025-06-30",
    "confidential": False,
    "autoRefresh": False,
    "status": "active",
    "locations": [
        {
            "id": 6167865,
            "name": "Toronto",
            "description": "Toronto, ON",
            "type": "City",
            "latitude": 43.70011,
            "longitude": -79.4163,
        },
        {
            "id": 9,
            "name": "Ontario",
            "description": "Ontario",
            "type": "Province",
            "latitude": None,
            "longitude": None,
        },
    ],
    "workplaceType": "onSite",
    "applicantLocations": [],
    "categories": [{"id": 1, "name": "Accounting & Finance"}, {"id": 23, "name": "Sales"}],
    "positionType": {"id": 1, "name": "Full Time"},
    "salary": {
        "amount": 60000,
        "maxAmount": 70000.5,
        "period": {"id": 1, "name": "Yearly", "unit": "year"},
        "plusCommission": True,
    },
    "description": '<p>Join <strong>us</strong>. <a href="https://example.com">More</a></p>',
    "applicantRoutingType": {"id": 1, "name": "Email"},
    "applicationEmail": "jobs@erable.test",
    "applicationUrl": None,
    "language": "en",
    "translation": {
        "title": "Comptable principal ou principale",
        "description": "<p>Joignez-vous à nous.</p>",
    },
    "updatedAt": "2025-05-01T13:45:02.118Z",
    "aiScreening": False,
    "existingVacancy": None,
    "takenDown": False,
    "questions": [
        {
            "id": "workAuth",
            "type": "yesNo",
            "text": "Are you legally entitled to work in Canada?",
            "translation": "Êtes-vous légalement autorisé à travailler au Canada?",
            "required": True,
            "knockOut": [False],
        }
    ],
}


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document()["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield method, path, operation


def walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        yield from walk(child)


def resolve(ref: str) -> Any:
    node: Any = document()
    for raw in ref.removeprefix("#/").split("/"):
        node = node[raw.replace("~1", "/").replace("~0", "~")]
    return node
