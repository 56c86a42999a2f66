"""Sync runs (C11): start one, add to an open one, start, cancel, read it, its items, the list."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import falcon
from sqlalchemy import Row

from api import query, quotas, representations
from api.auth import access_of, employer_of, require_employer
from api.body import JOB_BODY_LIMIT, MiB, media_type, parse_json_streamed, read_bytes
from api.errors import Problem
from api.idempotency import Endpoint, dry_run, idempotent
from api.responses import path_id, send_json
from models.core.errors import FieldError
from models.db.unit_of_work import after_commit
from models.idempotency import Scope
from models.syncs import requests as sync_requests
from models.syncs import runs as syncs

SYNC_BODY_LIMIT = 50 * MiB  # C1, C11
NO_STORE = "no-store"  # the counts move while the run goes on
# Hands a queued run to the broker after commit (workers.enqueue.sync); a broker that is
# down loses nothing: the sweeper enqueues the run (C11).
EnqueueSync = Callable[[int, str | None], object]


def sync_body(req: falcon.Request) -> dict[str, Any]:
    """The body of POST /syncs and /syncs/{id}/jobs (413, 415, then 400), parsed once: its
    items packed as they are read, so a 50 MiB body takes a few times its size (C11)."""
    parsed: dict[str, Any] | None = getattr(req.context, "sync_body", None)
    if parsed is None:
        data = read_bytes(req, SYNC_BODY_LIMIT)
        if media_type(req) != "application/json":
            raise Problem(415, "unsupported_media_type", "Send the body as application/json.")
        parsed = parse_json_streamed(
            data, "jobs", sync_requests.pack, most=sync_requests.PER_REQUEST
        )
        req.context.sync_body = parsed
    return parsed


def _keys_scope(req: falcon.Request, params: dict[str, object]) -> Scope | None:
    """The employer's keys (C10). A dry run records nothing, so it takes none: the query's is
    seen by the layer (`dry_runs`), the body's here."""
    if sync_body(req).get("dryRun") is True:
        return None
    return Scope("employer", access_of(req).employer_id)


KEYED = Endpoint(
    scope=_keys_scope,
    limit=SYNC_BODY_LIMIT,
    media_types=("application/json",),
    media_detail="Send the body as application/json.",
    dry_runs=True,
    parse=sync_body,
)


def _no_body(req: falcon.Request) -> None:
    """Action endpoints take no body; one sent must be JSON, and is ignored (C14)."""
    if read_bytes(req, JOB_BODY_LIMIT) and media_type(req) != "application/json":
        raise Problem(415, "unsupported_media_type", "Send no body, or an application/json one.")


class _Syncs:
    requires_employer = True  # read by MethodOverride: 401 outranks its 400 (C1)

    def __init__(
        self, now: Callable[[], datetime], enqueue: EnqueueSync, public_base_url: str
    ) -> None:
        self.now, self.enqueue, self.public_base_url = now, enqueue, public_base_url

    def _location(self, req: falcon.Request, run_id: int) -> str:
        return f"{self.public_base_url}/api/v1.1/syncs/{run_id}"

    def _enqueue_after_commit(self, req: falcon.Request, run_id: int) -> None:
        request_id = getattr(req.context, "request_id", None)
        after_commit(req.context.db.session, lambda: self.enqueue(run_id, request_id))


def _send(resp: falcon.Response, run: Row[Any], status: int = 200) -> None:
    resp.set_header("Cache-Control", NO_STORE)
    send_json(resp, representations.sync_run(run), status)


@falcon.before(require_employer)
class SyncCollection(_Syncs):
    @idempotent(KEYED)
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = sync_body(req)
        quotas.charge(req, _items(body) - 1)  # C23: each job counts, the request was one
        dry = dry_run(req)
        session, employer = req.context.db.session, employer_of(req)
        syncs.lock_intake(session, employer)  # 409 before 422 (C1)
        request = sync_requests.check_request(body, dry_run=dry)
        run = syncs.start(session, employer, request, now=self.now())
        if run.status == "queued":
            self._enqueue_after_commit(req, run.id)
        resp.location = self._location(req, run.id)
        _send(resp, run, 202)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        errors: list[FieldError] = []
        paging = query.paging(req, errors)
        if errors:
            raise query.invalid(errors)
        runs, total = syncs.listing(
            req.context.db.connection,
            employer_id=access_of(req).employer_id,
            offset=paging.offset,
            limit=paging.page_size,
        )
        resp.set_header("Cache-Control", NO_STORE)
        send_json(
            resp,
            {
                "data": [representations.sync_run(r) for r in runs],
                "paging": query.paging_object(req, self.public_base_url, paging, total, {}),
            },
        )


@falcon.before(require_employer)
class SyncRunResource(_Syncs):
    def on_get(self, req: falcon.Request, resp: falcon.Response, sync_id: str) -> None:
        run_id = path_id(sync_id, "sync run")
        _send(resp, syncs.read(req.context.db.connection, access_of(req).employer_id, run_id))


@falcon.before(require_employer)
class SyncJobs(_Syncs):
    def on_post(self, req: falcon.Request, resp: falcon.Response, sync_id: str) -> None:
        body = sync_body(req)  # 400 outranks 404 (C1)
        quotas.charge(req, _items(body) - 1)  # C23: each job counts, the request was one
        run_id = path_id(sync_id, "sync run")
        _send(resp, syncs.add(req.context.db.session, employer_of(req), run_id, body))


def _items(body: dict[str, Any]) -> int:
    """How many jobs a sync request carries, for the limits (C23); its checks come after."""
    jobs = body.get("jobs")
    return len(jobs) if isinstance(jobs, list) else 1


@falcon.before(require_employer)
class SyncStart(_Syncs):
    def on_post(self, req: falcon.Request, resp: falcon.Response, sync_id: str) -> None:
        _no_body(req)
        run_id = path_id(sync_id, "sync run")
        run = syncs.queue(req.context.db.session, employer_of(req), run_id, now=self.now())
        self._enqueue_after_commit(req, run.id)
        _send(resp, run, 202)


@falcon.before(require_employer)
class SyncCancel(_Syncs):
    def on_post(self, req: falcon.Request, resp: falcon.Response, sync_id: str) -> None:
        _no_body(req)
        run_id = path_id(sync_id, "sync run")
        employer_id = access_of(req).employer_id
        _send(resp, syncs.cancel(req.context.db.session, employer_id, run_id, now=self.now()))


@falcon.before(require_employer)
class SyncItems(_Syncs):
    def on_get(self, req: falcon.Request, resp: falcon.Response, sync_id: str) -> None:
        errors: list[FieldError] = []
        outcome = query.choice(req, "outcome", syncs.OUTCOMES, errors)
        paging = query.paging(req, errors)
        if errors:
            raise query.invalid(errors)
        connection = req.context.db.connection
        run = syncs.read(connection, access_of(req).employer_id, path_id(sync_id, "sync run"))
        rows, total = syncs.item_page(
            connection, run.id, outcome=outcome, offset=paging.offset, limit=paging.page_size
        )
        resp.set_header("Cache-Control", NO_STORE)
        send_json(
            resp,
            {
                "data": [representations.sync_item(r) for r in rows],
                "paging": query.paging_object(
                    req, self.public_base_url, paging, total, {"outcome": outcome}
                ),
            },
        )
