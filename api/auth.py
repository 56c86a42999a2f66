"""The API-Key header decides the employer (C2)."""

from __future__ import annotations

from typing import Any

import falcon

from api.errors import Problem
from api.responses import int32
from models import employers, keys
from models.core.dates import utcnow
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
    needed = scope_of(req.uri_template or req.path, req.method)
    if not access.holds(needed):
        raise Problem(
            403,
            "insufficient_scope",
            f"This key does not hold {needed}, which {req.method} {req.path} needs.",
            headers={
                "WWW-Authenticate": f'API-Key realm="jobpost", error="insufficient_scope", '
                f'scope="{needed}"'
            },
        )
    req.context.access = access
    quotas = getattr(req.context, "quotas", None)
    if quotas is not None:  # C23: after 401 and 403, before the body is read
        quotas.charge(req)
    now = utcnow()
    if keys.stale(access, now):
        req.context.used_key = access.key_id  # recorded after the response (api/middleware)


API = "/api/v1.1"  # the keyed API's paths, under it
READS = frozenset({"GET", "HEAD"})
# The scope each part of the keyed API needs (C23): (to read, to write).
_SCOPES = {
    "jobs": ("jobs:read", "jobs:write"),
    "applications": ("applications:read", "applications:write"),
    "syncs": ("syncs", "syncs"),
    "webhooks": ("webhooks", "webhooks"),
    "employer": ("employer", "employer"),
    "keys": ("employer", "employer"),
}


def scope_of(template: str, method: str) -> str:
    """The scope a keyed route needs for `method`: by the first part of its path under the
    API's, a job's applications being applications (C23)."""
    parts = template.removeprefix(API).strip("/").split("/")
    part = "applications" if parts[:1] == ["jobs"] and parts[2:3] == ["applications"] else parts[0]
    read, write = _SCOPES[part]
    return read if method in READS else write


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
