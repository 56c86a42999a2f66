"""The API-Key header decides the employer (C2)."""

from __future__ import annotations

from typing import Any

import falcon

from api.errors import Problem
from models import employers
from models.entities import Employer


def require_employer(
    req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
) -> None:
    """A falcon `before` hook: 401 unless API-Key names a live key."""
    employer = employers.authenticate(req.context.session, req.get_header("API-Key"))
    if employer is None:
        raise Problem(
            401,
            "unauthorized",
            "Send a valid API key in the API-Key header.",
            headers={"WWW-Authenticate": 'API-Key realm="jobpost"'},
        )
    req.context.employer = employer


def employer_of(req: falcon.Request) -> Employer:
    employer: Employer = req.context.employer
    return employer
