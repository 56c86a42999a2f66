"""The API-Key header decides the employer (C2)."""

from __future__ import annotations

from typing import Any

import falcon

from api.errors import Problem
from api.responses import int32
from models import employers
from models.db.entities import Employer


def require_employer(
    req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
) -> None:
    """A falcon `before` hook: 401 unless API-Key names a live key. A job id in the path is
    looked up in the same statement (`access_of(req).job_version`, None: no such job), and
    read whole there too if the resource will want it (`wants_whole_job`)."""
    raw = params.get("job_id")
    job_id = int32(raw) if isinstance(raw, str) else None  # a bad id is a 404, after the 401
    wants: Any = getattr(resource, "wants_whole_job", None)
    whole = job_id is not None and wants is not None and wants(req, job_id)
    access = employers.authenticate(
        req.context.db.connection, req.get_header("API-Key"), job_id, whole=whole
    )
    if access is None:
        raise Problem(
            401,
            "unauthorized",
            "Send a valid API key in the API-Key header.",
            headers={"WWW-Authenticate": 'API-Key realm="jobpost"'},
        )
    req.context.access = access


def access_of(req: falcon.Request) -> employers.Access:
    access: employers.Access = req.context.access
    return access


def employer_of(req: falcon.Request) -> Employer:
    """The caller's employer as an ORM object of the request's session, made on first use."""
    employer: Employer | None = req.context.employer
    if employer is None:
        employer = employers.attach(req.context.db.session, access_of(req))
        req.context.employer = employer
    return employer
