"""Webhook endpoints over the API (C12): register, list, read, update, delete, rotate the
secret, test, the deliveries log and retrying one. Scoped to the key's employer: another
employer's endpoint or delivery is a 404. The rules live in models.webhooks.endpoints."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime

import falcon
from sqlalchemy.orm import Session

from api import query, representations
from api.auth import access_of, require_employer
from api.body import JOB_BODY_LIMIT, media_type, read_bytes, read_json
from api.errors import Problem
from api.ratelimit import Limiter, Unlimited
from api.responses import path_id, send_json
from models.core.errors import FieldError
from models.db.entities import WebhookEndpoint
from models.db.unit_of_work import after_commit
from models.webhooks import delivery_log as delivery_log
from models.webhooks import endpoints as webhooks
from models.webhooks import messages as webhook_messages
from models.webhooks.secrets import KeySource, MissingKey, load_key

log = logging.getLogger("jobpost.api")
EnqueueWebhooks = Callable[[list[int]], object]


def nothing(delivery_ids: list[int]) -> None:
    """No broker wired: the sweeper enqueues due deliveries later."""


# An operator has to set the key and restart: minutes, not the database's seconds.
KEY_RETRY_AFTER_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class Context:
    """What the webhook resources share: the settings for the key and the URL rules, the
    instant, where links point, and how deliveries are enqueued after commit."""

    keys: KeySource
    policy: webhooks.UrlPolicy
    now: Callable[[], datetime]
    public_base_url: str
    enqueue: EnqueueWebhooks = nothing
    resends: Limiter = dataclasses.field(default_factory=Unlimited)  # WEBHOOK_TEST_RATE_LIMIT

    def key(self) -> bytes:
        """The Fernet key; without one, no secret can be written: one log line naming the
        variable, and a 503 `secret_key_missing` that names no setting (C1, C12)."""
        try:
            return load_key(self.keys)
        except MissingKey as e:
            log.error("webhook secrets: %s", e)
            raise Problem(
                503,
                "secret_key_missing",
                "Webhook secrets cannot be stored until the operator configures the service's "
                "secret key; nothing was written.",
                headers={"Retry-After": str(KEY_RETRY_AFTER_SECONDS)},
            ) from None

    def check_resend(self, endpoint_id: int) -> None:
        """429 once an endpoint has had its share of tests and retries (C12): each one is an
        attempt the workers make at once, so an employer cannot keep them busy on demand."""
        wait = self.resends.hit(f"webhook-resend:{endpoint_id}")
        if wait is not None:
            raise Problem(
                429,
                "rate_limited",
                f"Too many tests and retries for this webhook; retry in {wait} s.",
                headers={"Retry-After": str(wait)},
            )

    def location(self, req: falcon.Request, endpoint_id: int) -> str:
        return f"{self.public_base_url}/api/v1.1/webhooks/{endpoint_id}"


def private(resp: falcon.Response) -> None:
    """Secrets and the events' log: no cache may keep them (the key is no Authorization)."""
    resp.set_header("Cache-Control", "no-store")


def no_body(req: falcon.Request) -> None:
    """Action endpoints take no body; one sent must be JSON, and is ignored (C14)."""
    if read_bytes(req, JOB_BODY_LIMIT) and media_type(req) != "application/json":
        raise Problem(415, "unsupported_media_type", "Send no body, or an application/json one.")


def _session(req: falcon.Request) -> Session:
    session: Session = req.context.db.session
    return session


def _endpoint(req: falcon.Request, webhook_id: str) -> WebhookEndpoint:
    employer = access_of(req).employer_id
    return webhooks.get_endpoint(_session(req), employer, path_id(webhook_id, "webhook"))


@falcon.before(require_employer)
class Collection:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        key = self.context.key()  # before any rule: no name is resolved for a refused write
        session, now, employer_id = _session(req), self.context.now(), access_of(req).employer_id
        full = webhooks.endpoints_full(session, employer_id)
        write = webhooks.check_write(body, self.context.policy, create=True, full=full)
        endpoint, secret = webhooks.create_endpoint(session, employer_id, write, key, now=now)
        resp.location = self.context.location(req, endpoint.id)
        private(resp)
        send_json(resp, representations.endpoint(endpoint, secret), 201)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        errors: list[FieldError] = []
        paging = query.paging(req, errors)
        if errors:
            raise query.invalid(errors)
        page = webhooks.list_endpoints(
            _session(req),
            access_of(req).employer_id,
            limit=paging.page_size,
            offset=paging.offset,
        )
        links = query.paging_object(req, self.context.public_base_url, paging, page.total, {})
        private(resp)
        send_json(
            resp, {"data": [representations.endpoint(e) for e in page.endpoints], "paging": links}
        )


@falcon.before(require_employer)
class Item:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_get(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        private(resp)
        send_json(resp, representations.endpoint(_endpoint(req, webhook_id)))

    def on_put(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        body = read_json(req)  # C1: 413, 415 and 400 come before the 404
        endpoint = _endpoint(req, webhook_id)
        write = webhooks.check_write(body, self.context.policy, create=False)
        webhooks.update_endpoint(endpoint, write, now=self.context.now())
        _session(req).flush()
        private(resp)
        send_json(resp, representations.endpoint(endpoint))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        read_json(req, optional=True)  # a body is not needed, but must be JSON if sent (C1)
        webhooks.delete_endpoint(_session(req), _endpoint(req, webhook_id))
        resp.status = 204


@falcon.before(require_employer)
class Secret:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_post(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        no_body(req)
        endpoint = _endpoint(req, webhook_id)
        secret = webhooks.rotate_secret(endpoint, self.context.key(), now=self.context.now())
        _session(req).flush()
        private(resp)
        send_json(resp, {"secret": secret})


@falcon.before(require_employer)
class Test:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_post(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        no_body(req)
        session = _session(req)
        endpoint = _endpoint(req, webhook_id)
        self.context.check_resend(endpoint.id)
        now = self.context.now()
        message = webhooks.send_test(session, endpoint, now=now)
        _enqueue_after_commit(
            session, self.context, webhook_messages.pending_of(session, [message], now=now)
        )
        send_json(resp, {"id": message}, 202)


@falcon.before(require_employer)
class Deliveries:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_get(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        errors: list[FieldError] = []
        status = query.choice(req, "status", webhook_messages.DELIVERY_STATUSES, errors)
        paging = query.paging(req, errors)
        if errors:
            raise query.invalid(errors)
        endpoint = _endpoint(req, webhook_id)
        page = delivery_log.list_deliveries(
            _session(req),
            endpoint.id,
            status=status,
            limit=paging.page_size,
            offset=paging.offset,
        )
        links = query.paging_object(
            req, self.context.public_base_url, paging, page.total, {"status": status}
        )
        private(resp)
        send_json(
            resp, {"data": [representations.delivery(d) for d in page.deliveries], "paging": links}
        )


@falcon.before(require_employer)
class Retry:
    def __init__(self, context: Context) -> None:
        self.context = context

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, webhook_id: str, message_id: str
    ) -> None:
        no_body(req)
        session = _session(req)
        endpoint = _endpoint(req, webhook_id)
        self.context.check_resend(endpoint.id)
        retried = delivery_log.retry_delivery(
            session, endpoint.id, message_id, now=self.context.now()
        )
        _enqueue_after_commit(session, self.context, [retried])
        send_json(resp, {"id": message_id}, 202)


def _enqueue_after_commit(session: Session, context: Context, delivery_ids: list[int]) -> None:
    if delivery_ids:
        after_commit(session, lambda: context.enqueue(delivery_ids))
