"""gunicorn worker classes whose own answers are C1 problems too.

A request gunicorn cannot parse (a request line over `limit_request_line`, headers over their
limits, a malformed request line or header) never reaches the app: gunicorn answers it
itself, with an HTML page. C1 says every error is `application/problem+json`, and a client
that parses our errors must not meet HTML, so these workers answer those with a problem in
the C1 shape, keeping gunicorn's status and its warning line.
"""

from __future__ import annotations

from typing import Any

import orjson
from gunicorn import util
from gunicorn.http import errors as parse
from gunicorn.workers.sync import SyncWorker

from api.errors import PROBLEM, problem_body, title

INTERNAL = (500, "internal_error", "The server could not answer.")
# What a request gunicorn refuses is answered with, by its exception (first match wins);
# every other parse error is 400 malformed_request. The details name the limit, not the
# request's content: a header gunicorn refused is not echoed back.
REFUSALS: tuple[tuple[type[Exception], int, str, str], ...] = (
    (parse.LimitRequestLine, 414, "uri_too_long", "The request line is too long."),
    (
        parse.LimitRequestHeaders,
        431,
        "headers_too_large",
        "The request has too many headers, or one too large.",
    ),
    (parse.ExpectationFailed, 417, "expectation_failed", "Only Expect: 100-continue is known."),
    (
        parse.UnsupportedTransferCoding,
        501,
        "unsupported_transfer_coding",
        "Only the chunked transfer coding is supported.",
    ),
    (parse.ConfigurationProblem, *INTERNAL),
    (parse.ForbiddenProxyRequest, 403, "forbidden", "The proxy is not allowed."),
)
MALFORMED = (400, "malformed_request", "The request is not valid HTTP/1.1.")


def refusal(exc: BaseException) -> tuple[int, str, str]:
    """Status, code and detail for an error gunicorn met outside the app."""
    if isinstance(exc, parse.InvalidResponseHeader | parse.InvalidResponseHeaderName):
        return INTERNAL  # a header the app sent: the app's fault, as gunicorn judges it
    for kind, status, code, detail in REFUSALS:
        if isinstance(exc, kind):
            return status, code, detail
    return MALFORMED if isinstance(exc, parse.ParseException) else INTERNAL


def problem_response(status: int, code: str, detail: str) -> bytes:
    """A whole HTTP/1.1 response carrying the problem; the connection closes after it."""
    body = orjson.dumps(problem_body(status, code, detail))
    head = (
        f"HTTP/1.1 {status} {title(status)}\r\nConnection: close\r\n"
        f"Content-Type: {PROBLEM}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ProblemErrors:
    """Mixed into a gunicorn worker: its error answers as C1 problems."""

    log: Any

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status, code, detail = refusal(exc)
        ip = (addr or ("", -1))[0]
        if status == 500:
            self.log.exception("Error handling request from ip=%s", ip)
        else:
            self.log.warning("Invalid request from ip=%s: %s", ip, exc)
        try:
            util.write_nonblock(client, problem_response(status, code, detail))
        except Exception:
            self.log.debug("Failed to send error message.")


class ProblemSyncWorker(ProblemErrors, SyncWorker):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's sync worker (`jobpost serve`)."""
