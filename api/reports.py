"""Fraud reports (C13): the JSON twin of the report form, POST /api/v1.1/jobs/{id}/reports."""

from __future__ import annotations

import falcon

from api.body import read_json
from api.clients import client_address, rate_key
from api.errors import Problem
from api.ratelimit import Limiter
from api.responses import path_id, send_json
from models import reports
from models.settings import Network

REPORT_BODY_LIMIT = 16 * 1024  # 2,000 characters of details, and room for the rest
# The apply limit's setting, counted apart (C13): reports do not use up applications.
BUCKET = "report:"


class Reports:
    """No key: anyone may report a job. 202 and no Location: reports are not public."""

    def __init__(self, limiter: Limiter, trusted_proxies: tuple[Network, ...] = ()) -> None:
        self.limiter, self.trusted_proxies = limiter, trusted_proxies

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = read_json(req, limit=REPORT_BODY_LIMIT)  # 413, 415, 400
        wait = self.limiter.hit(BUCKET + rate_key(client_address(req, self.trusted_proxies)))
        if wait is not None:
            raise Problem(
                429,
                "rate_limited",
                f"Too many reports; retry in {wait} s.",
                headers={"Retry-After": str(wait)},
            )
        report = reports.create(req.context.db.session, path_id(job_id), body)  # 404, 410, 422
        send_json(resp, {"id": report.id, "status": report.status}, 202)
