"""Every error as an RFC 9457 problem in the C1 shape, mapped in this one place."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import falcon
import orjson
from sqlalchemy.exc import TimeoutError as PoolTimeout

from models.core.errors import (
    ApplyViaUrl,
    DeliveryNotFailed,
    DomainError,
    DuplicateReferenceId,
    FieldError,
    InsufficientScope,
    JobGone,
    JobTakenDown,
    NotFound,
    PreconditionFailed,
    ValidationFailed,
    WebhookDisabled,
)
from models.db.engines import connection_lost, database_said
from models.db.feed import ChangeTooSlow
from models.syncs.runs import SyncInProgress, SyncNotOpen

log = logging.getLogger("jobpost.api")
PROBLEM = "application/problem+json"

DOMAIN_STATUS: dict[type[DomainError], int] = {
    NotFound: 404,
    InsufficientScope: 403,
    DuplicateReferenceId: 409,
    ApplyViaUrl: 409,
    JobTakenDown: 409,
    JobGone: 410,
    WebhookDisabled: 409,
    DeliveryNotFailed: 409,
    PreconditionFailed: 412,
    SyncInProgress: 409,
    SyncNotOpen: 409,
    ValidationFailed: 422,
}
# Codes for the errors falcon itself raises (routing, method), by status.
FALCON_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    400: "malformed_json",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


class Problem(falcon.HTTPError):
    """An HTTP error with a C1 `code` and, for 422 and invalid_query, its `errors` entries."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status, title=title(status), description=detail, headers=headers)
        self.problem_code = code
        self.errors = errors


# RFC 9110 renamed these; Python before 3.13 still has the older phrases.
RFC_9110_TITLES = {413: "Content Too Large", 414: "URI Too Long", 422: "Unprocessable Content"}


def title(status: int) -> str:
    return RFC_9110_TITLES.get(status) or HTTPStatus(status).phrase


def problem_body(
    status: int, code: str, detail: str | None, errors: list[FieldError] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title(status),
        "status": status,
        "code": code,
    }
    if detail:
        body["detail"] = detail
    if errors is not None:
        body["errors"] = [e.as_dict() for e in errors]
    return body


def serialize(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError) -> None:
    """Falcon's error serializer: every HTTPError leaves as a C1 problem."""
    status = error.status_code
    code = getattr(error, "problem_code", None) or FALCON_CODES.get(status, "error")
    detail = error.description or _default_detail(status)
    resp.data = orjson.dumps(problem_body(status, code, detail, getattr(error, "errors", None)))
    resp.content_type = PROBLEM


def _default_detail(status: int) -> str:
    if status == 404:
        return "No such resource."
    if status == 405:
        return "This method is not allowed on this resource."
    return HTTPStatus(status).description


def handle_domain(
    req: falcon.Request, resp: falcon.Response, ex: DomainError, params: dict[str, Any]
) -> None:
    status = DOMAIN_STATUS.get(type(ex), 400)
    errors = ex.errors if isinstance(ex, ValidationFailed) else None
    etag = ex.etag if isinstance(ex, PreconditionFailed) else None
    headers = {"ETag": etag} if etag else None
    raise Problem(status, ex.code, ex.detail, errors=errors, headers=headers)


# A database that does not answer (down, restarting, its pool exhausted) is a 503 a client
# can retry after this many seconds, not a 500 with a traceback per request.
RETRY_AFTER_SECONDS = 5


def database_unavailable(ex: Exception) -> bool:
    """The database could not be reached, lost the connection, or has no connection free;
    or a write was too slow to commit within the change feeds' lag (C10, `models.db.feed`)."""
    return isinstance(ex, PoolTimeout | ChangeTooSlow) or connection_lost(ex)


def handle_unexpected(
    req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]
) -> None:
    """Anything unexpected: logged with the request id, never detailed to the client (C1)."""
    if isinstance(ex, falcon.HTTPError):
        raise ex
    request_id = getattr(req.context, "request_id", None)
    if database_unavailable(ex):
        log.error("database unavailable: %s", database_said(ex), extra={"request_id": request_id})
        raise Problem(
            503,
            "database_unavailable",
            "The service cannot reach its database just now; try again shortly.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    log.exception("unhandled error", extra={"request_id": request_id})
    raise Problem(
        500,
        "internal_error",
        "Something went wrong on our side. "
        f"Quote request id {getattr(req.context, 'request_id', '-')} to support.",
    )


def register(app: falcon.App[falcon.Request, falcon.Response], serializer: Any = serialize) -> None:
    """Error handlers and the serializer: `serialize`, or one that falls back to it."""
    app.set_error_serializer(serializer)
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(DomainError, handle_domain)


def unknown_method(req: falcon.Request, resp: falcon.Response, **kwargs: Any) -> None:
    """The responder for a method falcon does not know at all (FOO), where it would answer
    400: RFC 9110 section 9.1 says 501; a known method a resource lacks stays 405."""
    raise Problem(501, "method_not_implemented", f"The method {req.method} is not known here.")
