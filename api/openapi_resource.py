"""GET /api/v1.1/openapi.json: the OpenAPI 3.1 document of the whole API."""

from __future__ import annotations

import falcon

from api.openapi import document
from api.responses import send_cacheable


class OpenApi:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        send_cacheable(req, resp, document())
