"""Fraud reports (C13): the JSON twin of the report form, POST /api/v1.1/jobs/{id}/reports,
and the steps the form shares with it (`Reports.check_rate`, `Reports.store`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon

from api.body import read_json
from api.clients import client_address, rate_key
from api.errors import Problem
from api.ratelimit import Limiter
from api.responses import path_id, send_json
from models import reports
from models.core.settings import Network
from models.db.entities import JobReport
from models.db.unit_of_work import after_commit

REPORT_BODY_LIMIT = 16 * 1024  # 2,000 characters of details, and room for the rest
# The apply limit's setting, counted apart (C13): reports do not use up applications.
BUCKET = "report:"
EnqueueReport = Callable[[int], object]


def no_broker(report_id: int) -> None:
    """No broker wired: the sweeper enqueues the operator's email later."""


class Reports:
    """No key: anyone may report a job. 202 and no Location: reports are not public."""

    def __init__(
        self,
        limiter: Limiter,
        trusted_proxies: tuple[Network, ...] = (),
        *,
        notify: bool = False,
        enqueue: EnqueueReport = no_broker,
    ) -> None:
        self.limiter, self.trusted_proxies = limiter, trusted_proxies
        self.notify, self.enqueue = notify, enqueue

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = read_json(req, limit=REPORT_BODY_LIMIT)  # 413, 415, 400
        self.check_rate(req)
        report = self.store(req, path_id(job_id), body)  # 404, 410, 422
        send_json(resp, {"id": report.id, "status": report.status}, 202)

    def check_rate(self, req: falcon.Request) -> None:
        """429 once the client has sent its share of reports, the form's and the twin's; a
        request is counted once however often it is asked (before its form key is marked)."""
        if getattr(req.context, "report_rate_counted", False):
            return
        req.context.report_rate_counted = True
        wait = self.limiter.hit(BUCKET + rate_key(client_address(req, self.trusted_proxies)))
        if wait is not None:
            raise Problem(
                429,
                "rate_limited",
                f"Too many reports; retry in {wait} s.",
                headers={"Retry-After": str(wait)},
            )

    def store(self, req: falcon.Request, job_id: int, body: dict[str, Any]) -> JobReport:
        """The report stored, with the operator's email in its transaction when REPORTS_EMAIL
        is set, enqueued once committed (C13)."""
        session = req.context.db.session
        report = reports.create(session, job_id, body, notify=self.notify)
        if self.notify:
            report_id = report.id
            after_commit(session, lambda: self.enqueue(report_id))
        return report
