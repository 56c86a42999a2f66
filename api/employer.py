"""The key's own employer and its settings (C13): GET and PUT /api/v1.1/employer."""

from __future__ import annotations

import falcon

from api import representations
from api.auth import access_of, require_employer
from api.body import read_json
from api.responses import send_json
from models import employers
from models.applications import bounces
from models.core.errors import NotFound

# The employer's settings are its own, behind its key: no cache may keep them.
NO_STORE = "no-store"


@falcon.before(require_employer)
class EmployerSettings:
    requires_employer = True  # read by MethodOverride: 401 outranks its 400 (C1)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        employer = employers.get_employer(req.context.db.session, access_of(req).employer_id)
        resp.set_header("Cache-Control", NO_STORE)
        send_json(resp, representations.employer(employer))

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        session = req.context.db.session
        employer = employers.update_settings(session, access_of(req).employer_id, body)
        session.flush()
        resp.set_header("Cache-Control", NO_STORE)
        send_json(resp, representations.employer(employer))


@falcon.before(require_employer)
class FlaggedAddress:
    """DELETE /api/v1.1/employer/flagged-addresses/{address}: the employer clears a flag
    (C22), once the jobs that used the address are mended."""

    requires_employer = True

    def on_delete(self, req: falcon.Request, resp: falcon.Response, address: str) -> None:
        read_json(req, optional=True)  # a body is not needed, but must be JSON if sent (C1)
        if not bounces.clear(req.context.db.session, access_of(req).employer_id, address):
            raise NotFound(f"{address} is not a flagged or counted address of this employer.")
        resp.status = falcon.HTTP_204
