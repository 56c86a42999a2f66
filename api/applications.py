"""Applications over the API (C8): the public submission, and the employer's view."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import falcon
from sqlalchemy.orm import Session

from api import feed, forms, languages, query, representations
from api.auth import access_of, employer_of, require_employer
from api.body import read_json
from api.clients import client_address, rate_key
from api.errors import Problem
from api.idempotency import Endpoint, idempotent
from api.ratelimit import Limiter
from api.responses import INT32_MAX, int32, path_id, send_json
from models.applications import privacy, receipts, resumes
from models.applications import service as applications
from models.core.dates import utcnow
from models.core.errors import FieldError
from models.core.settings import Network
from models.db.entities import Application
from models.db.feed import DEFAULT_LAG_SECONDS
from models.db.unit_of_work import after_commit
from models.idempotency import Scope
from models.jobs import writes as jobs
from models.webhooks import messages as webhook_messages

Enqueue = Callable[[int, str | None], object]
EnqueueReceipt = Callable[[int], object]  # the applicant's receipt (C20), after commit


def no_receipt_broker(receipt_id: int) -> None:
    """No broker wired: the sweeper enqueues the receipt later (C20)."""


def job_scope(raw_id: object) -> Scope | None:
    """An application's Idempotency-Key belongs to its job (C10); a path id that names no job
    (not an Int32) has no keys, and is answered 404."""
    job_id = int32(raw_id) if isinstance(raw_id, str) else None
    return None if job_id is None else Scope("job", job_id)


KEYED = Endpoint(
    scope=lambda req, params: job_scope(params.get("job_id")),
    limit=forms.APPLICATION_BODY_LIMIT,
    media_types=forms.FORM_TYPES,
    media_detail="Send the application as application/json or multipart/form-data.",
    rate=lambda resource, req: resource.intake.check_rate(req),
)


def private(resp: falcon.Response) -> None:
    """Applications are personal data (C8) behind a key that is no Authorization header, so
    no cache, shared or the browser's, may keep them or hand them to another client."""
    resp.set_header("Cache-Control", "no-store")


class Intake:
    """The steps every application takes, from the API or the HTML form, in C1's order."""

    def __init__(
        self,
        limiter: Limiter,
        enqueue: Enqueue,
        trusted_proxies: tuple[Network, ...] = (),
        *,
        enqueue_webhooks: Callable[[list[int]], object] = lambda ids: None,
        public_base_url: str,
        enqueue_receipt: EnqueueReceipt = no_receipt_broker,
    ) -> None:
        self.limiter, self.enqueue, self.trusted_proxies = limiter, enqueue, trusted_proxies
        self.enqueue_webhooks, self.public_base_url = enqueue_webhooks, public_base_url
        self.enqueue_receipt = enqueue_receipt

    def receive(self, req: falcon.Request, job_id: str) -> Application | None:
        """Store an application; None when the honeypot was filled (nothing stored)."""
        return self.store(req, job_id, self.read(req))

    def read(self, req: falcon.Request) -> dict[str, Any]:
        """413, 415, 429, then 400: the body's fields, JSON or multipart."""
        kind, data = forms.read_raw(req)
        self.check_rate(req)
        return forms.parse(req, kind, data)

    def store(self, req: falcon.Request, job_id: str, fields: dict[str, Any]) -> Application | None:
        """404, 409, then 422: the application stored, its copy then its receipt (C20, in
        the language of the page applied on) enqueued after commit."""
        session: Session = req.context.db.session
        job = applications.open_job(session, path_id(job_id))
        if fields.get("website"):  # the honeypot: a bot is told it succeeded
            return None
        submission = applications.check(fields, job)
        application = applications.submit(session, job, submission)
        app_id, request_id = application.id, req.context.request_id
        req.context.application_id = app_id  # its Idempotency-Key record names it (C13)
        if application.outbox is not None:  # None: knocked out, stored only (C21)
            after_commit(session, lambda: self.enqueue(app_id, request_id))
        receipt_id = receipts.queue(
            session,
            application,
            language=languages.choose(req, job.language),
            confidential=job.confidential,
        )
        after_commit(session, lambda: self.enqueue_receipt(receipt_id))
        self.announce(req, session, job.employer_id, application)
        return application

    def announce(
        self, req: falcon.Request, session: Session, employer_id: int, a: Application
    ) -> None:
        """`application.received` in the application's own transaction (C12): the employer's
        view of it, and the absolute address of its résumé (or null)."""
        resume_url = None
        if a.resume_filename:
            base = self.public_base_url
            resume_url = f"{base}/api/v1.1/applications/{a.id}/resume"
        data = {**representations.application(a), "resumeUrl": resume_url}
        now = utcnow()
        message = webhook_messages.emit(
            session, employer_id, "application.received", data, application_id=a.id, now=now
        )
        deliveries = webhook_messages.pending_of(session, [message], now=now)
        if deliveries:
            after_commit(session, lambda: self.enqueue_webhooks(deliveries))

    def check_rate(self, req: falcon.Request) -> None:
        """Count the request against APPLY_RATE_LIMIT, once however often it is asked: before
        its Idempotency-Key is marked, and again in C1's order."""
        if getattr(req.context, "rate_counted", False):
            return
        req.context.rate_counted = True
        wait = self.limiter.hit(rate_key(client_address(req, self.trusted_proxies)))
        if wait is not None:
            raise Problem(
                429,
                "rate_limited",
                f"Too many applications; retry in {wait} s.",
                headers={"Retry-After": str(wait)},
            )


class Submissions:
    """/api/v1.1/jobs/{id}/applications: POST is public; GET is the employer's."""

    def __init__(
        self, intake: Intake, public_base_url: str, changes: Changes | None = None
    ) -> None:
        self.intake, self.public_base_url = intake, public_base_url
        self.feed = changes or Changes()

    @idempotent(KEYED)
    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        application = self.intake.receive(req, job_id)
        # The honeypot's answer looks like any other success: a positive id (C8).
        app_id = application.id if application else secrets.randbelow(INT32_MAX) + 1
        send_json(resp, {"id": app_id, "status": "received"}, 202)

    @falcon.before(require_employer)
    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        wanted = _list_query(req, by_job=False)  # C1: a 400 outranks the 404
        job = jobs.get(req.context.db.session, employer_of(req), path_id(job_id))
        _send(req, resp, self.public_base_url, replace(wanted, job_id=job.id), self.feed)


class Collection:
    def __init__(self, public_base_url: str, changes: Changes | None = None) -> None:
        self.public_base_url = public_base_url
        self.feed = changes or Changes()

    @falcon.before(require_employer)
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        wanted = _list_query(req, by_job=True)
        _send(req, resp, self.public_base_url, wanted, self.feed, carry_job=True)


@dataclass(frozen=True)
class Changes:
    """The applications feed's clock and CHANGE_FEED_LAG_SECONDS (C10)."""

    now: Callable[[], datetime] = utcnow
    lag: float = DEFAULT_LAG_SECONDS


@dataclass(frozen=True)
class _ListQuery:
    job_id: int | None
    status: str | None
    paging: query.Paging
    received_since: str | None  # as sent, carried in the links
    since: datetime | None
    feed: feed.Feed | None  # with sort=receivedAt (C10)


def _list_query(req: falcon.Request, *, by_job: bool) -> _ListQuery:
    """The list's parameters; every malformed one is listed in one 400 invalid_query (C1)."""
    errors: list[FieldError] = []
    job_id = _job_filter(req, errors) if by_job else None
    status = query.choice(req, "status", applications.DELIVERY_STATES, errors)
    walk = feed.sort(req, "receivedAt", errors)
    since = feed.instant(req, "receivedSince", errors)
    wanted = None
    if walk:
        wanted = feed.request(req, "applications", access_of(req).employer_id, since, errors)
        paging = query.Paging(1, wanted.page_size)
    else:
        paging = query.paging(req, errors)
    if errors:
        raise query.invalid(errors)
    raw_since = query.param(req, "receivedSince", [])
    return _ListQuery(job_id, status, paging, raw_since, since, wanted)


def _send(
    req: falcon.Request,
    resp: falcon.Response,
    base: str,
    wanted: _ListQuery,
    changes: Changes,
    carry_job: bool = False,
) -> None:
    if wanted.feed is None:
        _send_page(req, resp, base, wanted, carry_job)
        return
    employer = employer_of(req)
    found = applications.changes(
        req.context.db.session,
        employer,
        job_id=wanted.job_id,
        status=wanted.status,
        after=wanted.feed.start,
        until=changes.now() - timedelta(seconds=changes.lag),
        limit=wanted.feed.page_size,
    )
    job = str(wanted.job_id) if carry_job and wanted.job_id is not None else None
    filters = {"status": wanted.status, "jobId": job}
    private(resp)
    paging = feed.paging(
        req, base, "applications", employer.id, wanted.feed.page_size, found.resume, filters
    )
    send_json(
        resp,
        {"data": [representations.application(a) for a in found.applications], "paging": paging},
    )


def _job_filter(req: falcon.Request, errors: list[FieldError]) -> int | None:
    """jobId: a job id (Int32, from 1), as openapi.json declares it."""
    raw = query.param(req, "jobId", errors)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10):
        errors.append(FieldError("jobId", "invalid_type", "jobId is a job id."))
        return None
    if not 1 <= int(raw) <= INT32_MAX:
        errors.append(FieldError("jobId", "out_of_range", f"jobId must be 1 to {INT32_MAX}."))
        return None
    return int(raw)


def _send_page(
    req: falcon.Request,
    resp: falcon.Response,
    base: str,
    wanted: _ListQuery,
    carry_job: bool = False,
) -> None:
    page = applications.listing(
        req.context.db.session,
        employer_of(req),
        job_id=wanted.job_id,
        status=wanted.status,
        limit=wanted.paging.page_size,
        offset=wanted.paging.offset,
        received_since=wanted.since,
    )
    job = str(wanted.job_id) if carry_job and wanted.job_id is not None else None
    # C10's order of the carried filters: q, status, jobId, updatedSince, receivedSince.
    filters = {"status": wanted.status, "jobId": job, "receivedSince": wanted.received_since}
    private(resp)
    send_json(
        resp,
        {
            "data": [representations.application(a) for a in page.applications],
            "paging": query.paging_object(req, base, wanted.paging, page.total, filters),
        },
    )


@falcon.before(require_employer)
class Item:
    def on_get(self, req: falcon.Request, resp: falcon.Response, application_id: str) -> None:
        a = applications.get(
            req.context.db.session, employer_of(req), path_id(application_id, "application")
        )
        private(resp)
        send_json(resp, representations.application(a))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, application_id: str) -> None:
        """Erase the application and every copy of it (C13): 204, or 404 when it is not
        this employer's (erased already included)."""
        read_json(req, optional=True)  # a body is not needed, but must be JSON if sent (C1)
        target = path_id(application_id, "application")
        privacy.erase_one(req.context.db.session, employer_of(req), target, now=utcnow())
        resp.status = falcon.HTTP_204


@falcon.before(require_employer)
class ResumeFile:
    def on_get(self, req: falcon.Request, resp: falcon.Response, application_id: str) -> None:
        session = req.context.db.session
        a = applications.get(session, employer_of(req), path_id(application_id, "application"))
        resp.data = applications.resume_bytes(session, a)
        private(resp)
        resp.content_type = resumes.served_type(a.resume_content_type or "application/octet-stream")
        resp.downloadable_as = a.resume_filename
        resp.set_header("X-Content-Type-Options", "nosniff")  # the detected type, never a guess
