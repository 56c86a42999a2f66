"""The job resources: the eight operations of the interface (C4 to C7)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta

import falcon
import orjson

from api import cache, feed, preconditions, query, representations
from api.auth import access_of, employer_of, require_employer
from api.body import JOB_BODY_LIMIT, read_json
from api.idempotency import Endpoint, dry_run, idempotent
from api.responses import path_id, send_json, send_validated
from api.webhooks import EnqueueWebhooks, nothing
from models.core.dates import utcnow
from models.core.errors import FieldError, NotFound
from models.db.unit_of_work import after_commit
from models.idempotency import Scope
from models.jobs import changes as job_changes
from models.jobs import digest as job_digest
from models.jobs import listing as job_listing
from models.jobs import tallies, warnings, workplace
from models.jobs import writes as jobs
from models.jobs.rules import STATUSES
from models.webhooks import messages as webhook_messages

# An employer's own jobs, one or a page, behind a key no cache takes for Authorization: no
# shared cache may keep them for another employer (PrivateNoCache in openapi.json).
PRIVATE = "private, no-cache"

# POST /jobs takes Idempotency-Key; its keys are the employer's (C10).
KEYED = Endpoint(
    scope=lambda req, params: Scope("employer", access_of(req).employer_id),
    limit=JOB_BODY_LIMIT,
    media_types=("application/json",),
    media_detail="Send the body as application/json.",
    dry_runs=True,
)


class _JobResource:
    requires_employer = True  # also read by MethodOverride: 401 outranks its 400 (C1)

    def __init__(
        self,
        today: Callable[[], date],
        public_base_url: str,
        kept: cache.Representations[int] | None = None,
        *,
        enqueue_webhooks: EnqueueWebhooks = nothing,
    ) -> None:
        self.today = today
        self.public_base_url = public_base_url
        self.kept = kept if kept is not None else cache.Representations[int](0)
        self.enqueue_webhooks = enqueue_webhooks

    def _enqueue(self, req: falcon.Request, messages: Sequence[str]) -> None:
        """The deliveries of the write's events (C12), handed to the workers once it commits."""
        if not messages:
            return
        session = req.context.db.session
        deliveries = webhook_messages.pending_of(session, list(messages), now=utcnow())
        if deliveries:
            after_commit(session, lambda: self.enqueue_webhooks(deliveries))

    def _location(self, req: falcon.Request, job_id: int) -> str:
        return f"{self.public_base_url}/api/v1.1/jobs/{job_id}"

    def _send_written(
        self, req: falcon.Request, resp: falcon.Response, applied: jobs.Applied, trial: bool
    ) -> None:
        """A job created answers its absolute Location with its 201 (C4)."""
        if applied.outcome == "created" and not trial:
            resp.location = self._location(req, applied.job.id)
        self._enqueue(req, applied.messages)
        _send_job(req, resp, applied, trial=trial)


def _send_job(
    req: falcon.Request, resp: falcon.Response, applied: jobs.Applied, *, trial: bool
) -> None:
    """A written job, and its warnings (C10), with the ETag a GET of it answers: that of the
    read shape, without `warnings`, so a client keeping the job can revalidate it with
    If-None-Match without reading it again. A dry run's job is not stored: no ETag; and its
    answer is 200, a would-be create too."""
    read = orjson.dumps(representations.job(applied.job, access_of(req).employer_name))
    if not trial:
        name = access_of(req).employer_name
        resp.set_header("ETag", job_digest.etag(applied.job.id, applied.job.version, name))
    notes = orjson.dumps([w.as_dict() for w in applied.warnings])
    created = applied.outcome == "created" and not trial
    resp.status, resp.content_type = 201 if created else 200, "application/json"
    more = b',"warnings":' + notes  # members beyond the read shape's
    if trial:
        name = access_of(req).employer_name
        more += b',"changes":' + orjson.dumps(
            representations.changes(applied.stored, applied.job, name)
        )
    resp.data = read[:-1] + more + b"}"


@falcon.before(require_employer)
class JobCollection(_JobResource):
    def __init__(
        self,
        today: Callable[[], date],
        public_base_url: str,
        searches: tallies.SearchTotals | None = None,
        *,
        now: Callable[[], datetime] = utcnow,
        lag: float = 5.0,
        enqueue_webhooks: EnqueueWebhooks = nothing,
    ) -> None:
        super().__init__(today, public_base_url, enqueue_webhooks=enqueue_webhooks)
        self.now, self.lag = now, lag  # the change feed's clock and CHANGE_FEED_LAG_SECONDS
        # The totals of searches, kept per process (C6: exact, and recounted after a change).
        self.searches = searches if searches is not None else tallies.SearchTotals()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The list by page (C6), or with sort=updatedAt the change feed (C10)."""
        errors: list[FieldError] = []
        status = query.choice(req, "status", STATUSES, errors)
        q = query.term(req, "q", errors)
        walk = feed.sort(req, "updatedAt", errors)
        since = feed.instant(req, "updatedSince", errors)
        kind = query.choice(req, "workplaceType", workplace.TYPES, errors)
        access = access_of(req)
        if walk and kind is not None:
            message = "workplaceType filters the list by page, not the change feed."
            errors.append(FieldError("workplaceType", "not_applicable", message))
        if walk:
            wanted = feed.request(req, "jobs", access.employer_id, since, errors)
            if errors:
                raise query.invalid(errors)
            self._send_changes(req, resp, wanted, q, status)
            return
        paging = query.paging(req, errors)
        if errors:
            raise query.invalid(errors)
        page = job_listing.listing(
            req.context.db.connection,
            access.employer_id,
            q=q,
            status=status,
            page=paging.page,
            page_size=paging.page_size,
            totals=self.searches,
            updated_since=since,
            workplace_type=kind,
        )
        filters = {
            "q": q,
            "status": status,
            "updatedSince": query.param(req, "updatedSince", []),
            "workplaceType": kind,
        }
        resp.set_header("Cache-Control", PRIVATE)
        send_json(
            resp,
            {
                "data": [representations.header(j, access) for j in page.jobs],
                "paging": query.paging_object(
                    req, self.public_base_url, paging, page.total, filters
                ),
            },
        )

    def _send_changes(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        wanted: feed.Feed,
        q: str | None,
        status: str | None,
    ) -> None:
        """A page of the change feed: only changes at least the lag old, which every
        transaction that could still commit an older one has done by then (C10)."""
        access = access_of(req)
        found = job_changes.changes(
            req.context.db.connection,
            access.employer_id,
            after=wanted.start,
            until=self.now() - timedelta(seconds=self.lag),
            q=q,
            status=status,
            limit=wanted.page_size,
        )
        resp.set_header("Cache-Control", PRIVATE)
        paging = feed.paging(
            req,
            self.public_base_url,
            "jobs",
            access.employer_id,
            wanted.page_size,
            found.resume,
            {"q": q, "status": status},
        )
        send_json(
            resp,
            {"data": [representations.change(j, access) for j in found.jobs], "paging": paging},
        )

    @idempotent(KEYED)
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        trial = dry_run(req)
        applied = jobs.post(
            req.context.db.session, employer_of(req), body, today=self.today(), dry_run=trial
        )
        self._send_written(req, resp, applied, trial)

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req)
        trial = dry_run(req)
        expected = preconditions.of_request(req, create_only_allowed=True)
        applied = jobs.apply(
            req.context.db.session,
            employer_of(req),
            body,
            today=self.today(),
            dry_run=trial,
            expect=expected.check,
        )
        self._send_written(req, resp, applied, trial)

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_json(req, optional=True)
        expected = preconditions.of_request(req)
        messages = jobs.delete_by_reference(
            req.context.db.session,
            employer_of(req),
            body,
            expect=expected.check if expected.any else None,
        )
        self._enqueue(req, messages)
        resp.status = 204


@falcon.before(require_employer)
class JobItem(_JobResource):
    def wants_whole_job(self, req: falcon.Request, job_id: int) -> bool:
        """A GET of a job this process keeps no copy of reads it with the key (`auth`); so
        does a PUT, whose write then needs no read of the job's locations and categories
        after its lock, while no one changed them (`models.jobs.writes.locked`)."""
        if req.method == "PUT":
            return True
        return req.method in ("GET", "HEAD") and not self.kept.holds(job_id)

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        """The job, from the kept copy while its version holds; ETag and 304 for clients
        that keep their own."""
        access, wanted = access_of(req), path_id(job_id)
        if access.job_version is None:  # read with the key, by `require_employer`
            raise NotFound(f"No job has id {job_id}.")
        entry = self.kept.get(wanted, access.job_version, access.employer_name)
        if entry is None:
            job = access.job or jobs.read(req.context.db.connection, access.employer_id, wanted)
            body = orjson.dumps(representations.job(job, access.employer_name))
            tag = job_digest.etag(job.id, job.version, access.employer_name)
            entry = self.kept.put(job.id, job.version, access.employer_name, body, tag)
        body = entry.body
        if access.flagged_address is not None:  # C22: beside the read shape, not in its ETag
            notes = orjson.dumps([warnings.undeliverable(access.flagged_address).as_dict()])
            body = body[:-1] + b',"warnings":' + notes + b"}"
        send_validated(req, resp, body, entry.etag, PRIVATE)

    def on_put(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        body = read_json(req)  # 400 outranks 404 (C1)
        trial = dry_run(req)
        session, employer = req.context.db.session, employer_of(req)
        job = jobs.locked(session, employer, path_id(job_id), known=access_of(req).job)
        preconditions.of_request(req).check(job)  # 412 after 404, before 409, 422
        applied = jobs.put(session, employer, job, body, today=self.today(), dry_run=trial)
        self._enqueue(req, applied.messages)
        _send_job(req, resp, applied, trial=trial)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        read_json(req, optional=True)  # a body is not needed, but must be JSON if sent (C1)
        expected = preconditions.of_request(req)
        messages = jobs.delete_by_id(
            req.context.db.session,
            employer_of(req),
            path_id(job_id),
            expect=expected.check if expected.any else None,
        )
        self._enqueue(req, messages)
        resp.status = 204


@falcon.before(require_employer)
class JobDigest:
    """GET /jobs/digest (C24): the hash of each status's (referenceId, ETag) lines; with
    `status`, that status's buckets; with `bucket` too, the bucket's jobs."""

    requires_employer = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        errors: list[FieldError] = []
        status = query.choice(req, "status", STATUSES, errors)
        bucket = query.number(req, "bucket", 0, job_digest.BUCKETS - 1, errors)
        if bucket is not None and status is None and not errors:
            message = "bucket names a bucket of one status: send status too."
            errors.append(FieldError("status", "required", message))
        if errors:
            raise query.invalid(errors)
        access = access_of(req)
        rows = job_digest.held(req.context.db.connection, access.employer_id, status)
        name = access.employer_name
        resp.set_header("Cache-Control", PRIVATE)
        if status is None:
            send_json(resp, representations.digest(job_digest.statuses(rows, name, STATUSES)))
        elif bucket is None:
            found = job_digest.with_buckets(rows, name, status)
            send_json(resp, representations.status_digest(found))
        else:
            whole, jobs = job_digest.in_bucket(rows, name, bucket)
            send_json(resp, representations.bucket_digest(status, bucket, whole, jobs))
