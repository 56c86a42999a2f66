"""Request middleware: request id, method override, CORS, and the per-request session."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import falcon
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from api.applications import Intake
from api.auth import require_employer
from api.body import read_json
from api.errors import Problem
from models import keys
from models.core.dates import utcnow
from models.db import unit_of_work

log = logging.getLogger("jobpost.api")

REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
OVERRIDABLE = ("post", "put", "delete")  # POST, and what an override may name (C7)
READS = frozenset({"GET", "HEAD"})  # methods that never write: their sessions only read
CORS_HEADERS = (
    "API-Key, Content-Type, X-HTTP-Method-Override, X-Request-ID, If-Match, If-None-Match, "
    "Idempotency-Key"
)


class RequestId:
    """Honour a well-formed X-Request-ID, else make one; echo it (C9)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = req.get_header("X-Request-ID") or ""
        req.context.request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        req.context.access = None  # set by require_employer
        req.context.employer = None  # made from it by employer_of

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        resp.set_header("X-Request-ID", req.context.request_id)


class MethodOverride:
    """POST with X-HTTP-Method-Override: PUT or DELETE is handled as that method (C7)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        override = req.get_header("X-HTTP-Method-Override")
        if req.method != "POST" or override is None:
            return
        method = override.strip().upper()
        if method not in ("PUT", "DELETE"):
            req.context.invalid_override = Problem(
                400,
                "invalid_method_override",
                "X-HTTP-Method-Override may name PUT or DELETE only.",
            )
            return
        req.method = method
        req.context.overridden = True  # its body rules are the method's, C1's 415 row aside

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]
    ) -> None:
        """An invalid override is a 400, after the 401, 413, 415 and 429 that outrank it (C1):
        a job's key and body are checked first, and an application's body and rate limit (C8);
        on a resource that takes neither POST nor a method it could name, the 405 that
        outranks them all answers."""
        problem: Problem | None = getattr(req.context, "invalid_override", None)
        if problem is None or not any(hasattr(resource, f"on_{m}") for m in OVERRIDABLE):
            return
        if getattr(resource, "requires_employer", False):
            require_employer(req, resp, resource, params)
            read_json(req, optional=True)
        elif isinstance(intake := getattr(resource, "intake", None), Intake):
            intake.read(req)
        raise problem


class Links:
    """RFC 8288 `Link` on a successful page of a list or a feed, from the links its paging
    member carries (api.query.links): `<…>; rel="next", <…>; rel="prev"` (C23)."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        found: dict[str, str] | None = getattr(req.context, "links", None)
        if found and req_succeeded and resp.status_code < 300:
            resp.set_header(
                "Link", ", ".join(f'<{url}>; rel="{rel}"' for rel, url in found.items())
            )


class Cors:
    """Any origin may call the API from a browser; preflights allow our headers (C2)."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        resp.set_header("Access-Control-Allow-Origin", "*")
        resp.set_header(
            "Access-Control-Expose-Headers",
            "Location, X-Request-ID, ETag, Retry-After, Idempotent-Replayed, Link, RateLimit, "
            "RateLimit-Policy",
        )
        if req.method == "OPTIONS" and req.get_header("Access-Control-Request-Method"):
            allow = resp.get_header("Allow") or "GET, POST, PUT, DELETE"
            resp.set_header("Access-Control-Allow-Methods", allow)
            resp.set_header("Access-Control-Allow-Headers", CORS_HEADERS)
            resp.set_header("Access-Control-Max-Age", "86400")


class Database:
    """A request's way to the database, opened on first use: `connection` for plain
    statements (authentication), `session` for the ORM, on the same connection. /healthz
    opens neither; a job served from the kept copies opens no session.

    GET and HEAD, which only read, use `models.db.unit_of_work.read_sessions`; the rest one
    transaction, committed by SessionManager."""

    def __init__(self, sessions: sessionmaker[Session], reads: Engine | None) -> None:
        self._sessions = sessions
        self._reads = reads  # the engine to check out a bare connection from, if any
        self._connection: Connection | None = None
        self.opened: Session | None = None

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            if self._reads is not None and self.opened is None:
                self._connection = self._reads.connect()
            else:
                self._connection = self.session.connection()
        return self._connection

    @property
    def session(self) -> Session:
        if self.opened is None:
            if self._reads is not None:
                self.opened = self._sessions(bind=self.connection)
            else:
                self.opened = self._sessions()
        return self.opened

    def close(self) -> None:
        try:
            if self.opened is not None:
                self.opened.close()
        finally:
            if self._reads is not None and self._connection is not None:
                self._connection.close()


class SessionManager:
    """One database unit per request (`Database`), committed once on success, rolled back
    otherwise; `req.context.db`, and `req.context.db.session` for short."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory
        self.reads = unit_of_work.read_sessions(factory)
        bind = self.reads.kw.get("bind")
        # A bare connection for reads needs an engine to check it out from; sessions bound
        # to a connection (the tests' rolled-back one) use theirs.
        self.read_engine = bind if isinstance(bind, Engine) else None

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Runs after MethodOverride has decided the method.
        if req.method in READS:
            req.context.db = Database(self.reads, self.read_engine)
        else:
            req.context.db = Database(self.factory, None)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, req_succeeded: bool
    ) -> None:
        database: Database | None = getattr(req.context, "db", None)
        if database is None:
            return
        session = database.opened
        try:
            if session is None or req.method in READS:
                return  # nothing to commit: close() ends the read
            if req_succeeded and resp.status_code < 400:
                unit_of_work.commit(session)
            else:
                # Detach first: a rollback would expire what the request loaded, and the
                # middleware that runs after this one (the access log) still reads the employer.
                session.expunge_all()
                unit_of_work.discard(session)
        finally:
            database.close()
            self._record_use(req)

    def _record_use(self, req: falcon.Request) -> None:
        """The key's use, in a transaction of its own after the request's (C23): a read
        writes nothing in its own, and a failed write's rollback must not undo it."""
        key_id = getattr(req.context, "used_key", None)
        if key_id is None:
            return
        try:
            with self.factory() as session:
                keys.touch(session.connection(), key_id, now=utcnow())
                unit_of_work.commit(session)
        except SQLAlchemyError as e:  # the answer stands; the next request records it
            log.warning("the key's last use was not recorded: %s", e)
