"""The WSGI application, assembled in one factory from its collaborators."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import falcon
from sqlalchemy.orm import Session, sessionmaker

from api import (
    alert_pages,
    applications,
    cache,
    employer,
    errors,
    feeds,
    health,
    idempotency,
    jobs,
    observability,
    quotas,
    ratelimit,
    reference,
    report_pages,
    reports,
    representations,
    search_pages,
    sitemaps,
    status_pages,
    syncs,
    webhooks,
)
from api import keys as api_keys
from api.auth import API
from api.middleware import Cors, Links, MethodOverride, RequestId, SessionManager
from api.openapi_resource import OpenApi
from api.pages import AppliedPage, ApplyForm, JobPage, PageKey, serialize_error
from api.server import DEFAULT_LISTEN_URL
from models.core import logs
from models.core.dates import today_in, utcnow
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.unit_of_work import make_sessionmaker, read_sessions
from models.notifications import channels as search_engines
from models.webhooks import payloads
from models.webhooks.endpoints import UrlPolicy

WsgiApp = falcon.App[falcon.Request, falcon.Response]


def _nothing(application_id: int, request_id: str | None) -> None:
    """No broker wired: the sweeper enqueues the outbox entry later."""


def _no_sync_broker(run_id: int, request_id: str | None) -> None:
    """No broker wired: the sweeper enqueues the queued run later (C11)."""


@dataclass
class Collaborators:
    """What the app needs from outside HTTP; `get_app` wires the real ones."""

    today: Callable[[], date] | None = None
    enqueue: applications.Enqueue = _nothing
    limiter: ratelimit.Limiter | None = None
    ready_checks: dict[str, health.Check] = field(default_factory=dict)
    queue_depths: observability.QueueDepths | None = None  # for /metrics (C9)
    # The instant: Idempotency-Key leases and ages, and the change feeds' present (C10).
    now: Callable[[], datetime] = utcnow
    enqueue_sync: syncs.EnqueueSync = _no_sync_broker  # a queued sync run, after commit (C11)
    enqueue_webhooks: webhooks.EnqueueWebhooks = webhooks.nothing  # deliveries, after commit
    url_policy: UrlPolicy | None = None  # tests: a resolver of their own (C12)
    enqueue_report: reports.EnqueueReport = reports.no_broker  # the operator's email (C13)
    enqueue_alert_mail: alert_pages.EnqueueAlertMail = alert_pages.no_mail  # C19's confirmation
    enqueue_receipt: applications.EnqueueReceipt = applications.no_receipt_broker  # C20
    resend_limiter: ratelimit.Limiter | None = None  # webhook tests and retries (C12)
    quotas: quotas.Quotas | None = None  # the keyed API's limits (C23); tests: their own
    # Where the server listens (api.server.listen_url): the base of absolute URLs when
    # PUBLIC_BASE_URL is unset. Never the request's Host or X-Forwarded-Host (C9).
    listen_url: str = DEFAULT_LISTEN_URL


def create_app(
    settings: Settings,
    sessions: sessionmaker[Session],
    parts: Collaborators | None = None,
    *,
    today: Callable[[], date] | None = None,
) -> WsgiApp:
    """Build the app; `today` gives the service date (C5), tests pass their own clock."""
    parts = parts or Collaborators()
    payloads.install(representations)  # the events a request emits carry the API's shapes
    search_engines.install(search_engines.of_settings(settings))  # the writes' notifications
    clock = today or parts.today or (lambda: today_in(settings.timezone))
    limiter = parts.limiter or ratelimit.build(settings.apply_rate_limit, settings.redis_url)
    # Observe first: its process_response runs last, after RequestId and every status change.
    middleware: list[Any] = [
        observability.Observe(settings.prometheus_multiproc_dir),
        RequestId(),
        MethodOverride(),
        Cors(),
        Links(),
        quotas.Limits(parts.quotas or quotas.build(settings)),  # C23
        idempotency.Keys(sessions, parts.now),  # releases keys after SessionManager ends
        SessionManager(sessions),
    ]
    app = App(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    errors.register(app, serialize_error)  # problems, but pages on the pages
    base = settings.public_base_url or parts.listen_url
    intake = applications.Intake(
        limiter,
        parts.enqueue,
        settings.trusted_proxies,
        enqueue_webhooks=parts.enqueue_webhooks,
        public_base_url=base,
        enqueue_receipt=parts.enqueue_receipt,
    )
    kept = cache.Representations[int](int(settings.job_cache_mb * 2**20))
    changes = applications.Changes(parts.now, settings.change_feed_lag_seconds)  # C10
    sync_parts = (parts.now, parts.enqueue_sync, base)
    hooks = webhooks.Context(
        keys=settings,
        policy=parts.url_policy
        or UrlPolicy(
            settings.webhook_allow_http,
            settings.webhook_allow_private,
            allowed_ports=settings.webhook_allowed_ports,
        ),
        now=parts.now,
        public_base_url=base,
        enqueue=parts.enqueue_webhooks,
        resends=parts.resend_limiter
        or ratelimit.build(settings.webhook_test_rate_limit, settings.redis_url),
    )
    # Half as much for the public pages (C13): each worker's memory stays within its bound.
    pages_kept = cache.Representations[PageKey](int(settings.job_cache_mb * 2**19))
    # A quarter for the search pages (C17), each kept a few seconds.
    searches = cache.Recent(
        int(settings.job_cache_mb * 2**18), settings.search_page_seconds, time.monotonic
    )
    reported = reports.Reports(
        limiter,
        settings.trusted_proxies,
        notify=settings.reports_email is not None,
        enqueue=parts.enqueue_report,
    )
    retention = settings.application_retention_days
    # C15: bodies read as they are sent, on sessions of their own; the feeds' validators
    # wait for the change feeds' lag (C10).
    feed_parts = (
        read_sessions(sessions),
        base,
        settings.timezone,
        parts.now,
        settings.change_feed_lag_seconds,
    )
    sign_up = alert_pages.SignUp(
        limiter, settings.trusted_proxies, parts.now, parts.enqueue_alert_mail
    )
    routes: dict[str, object] = {
        f"{API}/jobs": jobs.JobCollection(
            clock,
            base,
            now=parts.now,
            lag=settings.change_feed_lag_seconds,
            enqueue_webhooks=parts.enqueue_webhooks,
        ),
        f"{API}/jobs/digest": jobs.JobDigest(),  # C24; a literal segment wins over {job_id}
        f"{API}/jobs/{{job_id}}": jobs.JobItem(
            clock, base, kept, enqueue_webhooks=parts.enqueue_webhooks
        ),
        f"{API}/jobs/{{job_id}}/applications": applications.Submissions(intake, base, changes),
        f"{API}/applications": applications.Collection(base, changes),
        f"{API}/applications/{{application_id}}": applications.Item(),
        f"{API}/applications/{{application_id}}/resume": applications.ResumeFile(),
        f"{API}/syncs": syncs.SyncCollection(*sync_parts),
        f"{API}/syncs/{{sync_id}}": syncs.SyncRunResource(*sync_parts),
        f"{API}/syncs/{{sync_id}}/jobs": syncs.SyncJobs(*sync_parts),
        f"{API}/syncs/{{sync_id}}/start": syncs.SyncStart(*sync_parts),
        f"{API}/syncs/{{sync_id}}/cancel": syncs.SyncCancel(*sync_parts),
        f"{API}/syncs/{{sync_id}}/items": syncs.SyncItems(*sync_parts),
        f"{API}/jobs/{{job_id}}/reports": reported,
        f"{API}/employer": employer.EmployerSettings(),
        f"{API}/employer/flagged-addresses/{{address}}": employer.FlaggedAddress(),  # C22
        # C23: the employer's own keys, behind the `employer` scope.
        f"{API}/keys": api_keys.Collection(parts.now, base),
        f"{API}/keys/{{key_id}}": api_keys.Item(parts.now),
        f"{API}/keys/{{key_id}}/rotate": api_keys.Rotate(parts.now, base),
        f"{API}/webhooks": webhooks.Collection(hooks),
        f"{API}/webhooks/{{webhook_id}}": webhooks.Item(hooks),
        f"{API}/webhooks/{{webhook_id}}/secret": webhooks.Secret(hooks),
        f"{API}/webhooks/{{webhook_id}}/test": webhooks.Test(hooks),
        f"{API}/webhooks/{{webhook_id}}/deliveries": webhooks.Deliveries(hooks),
        f"{API}/webhooks/{{webhook_id}}/deliveries/{{message_id}}/retry": webhooks.Retry(hooks),
        f"{API}/positiontypes": reference.PositionTypes(),
        f"{API}/categories": reference.Categories(),
        f"{API}/locations": reference.Locations(base),
        f"{API}/locations/{{location_id}}": reference.LocationItem(),
        f"{API}/openapi.json": OpenApi(),
        # C8 public pages (HTML); the form's privacy notice states the retention (C13).
        "/jobs/{job_id}": JobPage(settings.timezone, base, pages_kept, retention_days=retention),
        "/jobs/{job_id}/apply": ApplyForm(intake, settings.timezone, retention_days=retention),
        "/jobs/{job_id}/applied": AppliedPage(),
        # C20: the applicant's private status page, and its self-serve erasure (C13).
        "/applications/status/{token}": status_pages.StatusPage(settings.timezone),
        "/applications/status/{token}/erase": status_pages.ErasePage(parts.now),
        "/jobs/{job_id}/report": report_pages.ReportForm(reported),  # C13
        "/jobs/{job_id}/reported": report_pages.Reported(settings),
        "/policies/job-fraud": report_pages.FraudPolicy(settings),
        "/policies/privacy": report_pages.PrivacyPolicy(settings),
        # C17: the public search, for people; the API's list is under /api/.
        "/": search_pages.SearchPage(base, clock, searches),
        "/jobs": search_pages.SearchPage(base, clock, searches),
        # C15: what search engines, aggregators and feed readers read.
        "/robots.txt": sitemaps.Robots(base),
        "/sitemap.xml": sitemaps.SitemapIndex(base),
        "/sitemaps/jobs-{number:int(min=1)}.xml": sitemaps.SitemapChunk(*feed_parts[:2]),
        "/feeds/jobs.json": feeds.JsonFeed(*feed_parts),
        "/feeds/jobs.atom": feeds.AtomFeed(*feed_parts, today=clock),
        "/feeds/indeed.xml": feeds.IndeedFeed(*feed_parts),
        # C19: job alerts, by double opt-in, managed and unsubscribed by their links.
        "/alerts/new": sign_up,
        "/alerts/sent": alert_pages.Sent(),
        "/alerts/confirm/{token}": alert_pages.Confirm(parts.now),
        "/alerts/manage/{token}": alert_pages.Manage(parts.now),
        "/alerts/unsubscribe/{token}": alert_pages.Unsubscribe(parts.now),
        "/healthz": health.Health(),
        "/readyz": health.Ready(parts.ready_checks, settings.ready_timeout_seconds),
        "/metrics": observability.Metrics(
            observability.StateCollector(
                sessions, parts.queue_depths, settings.ready_timeout_seconds
            )
        ),
    }
    if settings.indexnow_key:  # C18: the key file IndexNow reads to trust the site's batches
        routes[f"/{settings.indexnow_key}.txt"] = sitemaps.IndexNowKey(settings.indexnow_key)
    for path, resource in routes.items():
        answer_head_as_get(resource)
        app.add_route(path, resource)
    return app


def answer_head_as_get(resource: object) -> None:
    """HEAD is GET without the body (RFC 9110 section 9.3.2; falcon leaves the body out)."""
    if hasattr(resource, "on_get") and not hasattr(resource, "on_head"):
        resource.on_head = resource.on_get  # type: ignore[attr-defined]


class App(falcon.App):  # type: ignore[type-arg]
    """falcon's app, answering a method it does not know (RFC 9110 section 9.1) with 501 in
    the C1 shape, where falcon answers 400 "Invalid HTTP method"."""

    _default_responder_bad_request = errors.unknown_method  # type: ignore[assignment]


def get_app(listen_url: str | None = None) -> WsgiApp:
    """For gunicorn (`api.app:get_app()`), once in each web process: the settings read from
    the environment here, and everything the app needs made from them (C9). `listen_url`:
    where `jobpost serve` listens; under plain gunicorn, which does not say, its default."""
    from workers import broker, enqueue  # neither imports Celery nor kombu (issue 15)

    settings = Settings.from_env()
    logs.configure()
    publisher = enqueue.Publisher(settings)  # Celery's app, made by the first task sent
    engine = make_engine(settings.database_url)
    timeout = settings.ready_timeout_seconds
    parts = Collaborators(
        enqueue=lambda app_id, rid: enqueue.deliver(publisher.app, app_id, rid),
        enqueue_sync=lambda run_id, rid: enqueue.sync(publisher.app, run_id, rid),
        enqueue_webhooks=lambda ids: enqueue.deliver_webhooks(publisher.app, ids),
        enqueue_report=lambda report_id: enqueue.deliver_report(publisher.app, report_id),
        enqueue_alert_mail=lambda mail_id: enqueue.deliver_alert_mail(publisher.app, mail_id),
        enqueue_receipt=lambda receipt_id: enqueue.deliver_receipt(publisher.app, receipt_id),
        ready_checks={
            "database": health.database_check(engine),
            "broker": lambda: broker.ping(settings.broker_url, timeout),
        },
        queue_depths=lambda: broker.depths(settings.broker_url, timeout),
        listen_url=listen_url or DEFAULT_LISTEN_URL,
    )
    return create_app(settings, make_sessionmaker(engine, settings.change_feed_lag_seconds), parts)
