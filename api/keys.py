"""API keys over the API (C23): list, create, rotate and revoke the employer's own keys,
behind the `employer` scope. A secret is in the answer that makes it and nowhere else; no
Idempotency-Key is taken here, since its stored answer would hold the secret. The rules live
in models.keys."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import falcon

from api import representations
from api.auth import API, access_of, require_employer
from api.body import read_json
from api.responses import path_id, send_json
from models import keys

# A key's secret is for the caller alone: no cache may keep an answer holding one.
NO_STORE = "no-store"


@falcon.before(require_employer)
class Collection:
    requires_employer = True  # read by MethodOverride: 401 outranks its 400 (C1)

    def __init__(self, now: Callable[[], datetime], base: str) -> None:
        self.now, self.base = now, base

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = keys.live(req.context.db.session, access_of(req).employer_id, now=self.now())
        resp.set_header("Cache-Control", NO_STORE)
        send_json(resp, {"data": [representations.api_key(k) for k in found]})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        issued = keys.create(req.context.db.session, access_of(req), body, now=self.now())
        _send_issued(req, resp, issued, self.base)


@falcon.before(require_employer)
class Item:
    requires_employer = True

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def on_get(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        access = access_of(req)
        found = keys.one(
            req.context.db.session, access.employer_id, path_id(key_id), now=self.now()
        )
        resp.set_header("Cache-Control", NO_STORE)
        send_json(resp, representations.api_key(found))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        read_json(req, optional=True)  # a body is not needed, but must be JSON if sent (C1)
        keys.revoke(req.context.db.session, access_of(req), path_id(key_id), now=self.now())
        resp.status = falcon.HTTP_204


@falcon.before(require_employer)
class Rotate:
    requires_employer = True

    def __init__(self, now: Callable[[], datetime], base: str) -> None:
        self.now, self.base = now, base

    def on_post(self, req: falcon.Request, resp: falcon.Response, key_id: str) -> None:
        body = read_json(req, optional=True) or {}
        session, access = req.context.db.session, access_of(req)
        issued = keys.rotate(session, access, path_id(key_id), body, now=self.now())
        _send_issued(req, resp, issued, self.base)


def _send_issued(
    req: falcon.Request, resp: falcon.Response, issued: keys.Issued, base: str
) -> None:
    """201 with the key, its secret, and its absolute Location."""
    resp.set_header("Cache-Control", NO_STORE)
    resp.location = f"{base}{API}/keys/{issued.key.id}"
    send_json(resp, representations.issued_key(issued.key, issued.secret), status=201)
