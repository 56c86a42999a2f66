"""Logs as JSON lines on standard error (C9), the same for the web and the workers.

Each record becomes one object: `time` (RFC 3339, UTC), `level`, `event` (the message, or an
explicit `event` extra), `logger`, the fields bound to the current context (`bind`: the request
id of the request or task being handled), then every extra passed with `extra={...}`;
an exception is one string field.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

from models.core.dates import timestamp

# The attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}
_context: ContextVar[dict[str, Any] | None] = ContextVar("jobpost_log_context", default=None)


def rfc3339(seconds: float) -> str:
    return timestamp(datetime.fromtimestamp(seconds, UTC))


Token = Any  # contextvars.Token of the context


def bind(**fields: Any) -> Token:
    """Add `fields` to every record logged from now on in this thread (or task) until
    `unbind` is given the returned token."""
    return _context.set({**(_context.get() or {}), **fields})


def unbind(token: Token) -> None:
    _context.reset(token)


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """`bind` for the duration of a block."""
    token = bind(**fields)
    try:
        yield
    finally:
        unbind(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; values that are not JSON become strings."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        data: dict[str, Any] = {
            "time": rfc3339(record.created),
            "level": record.levelname.lower(),
            "event": message,
            "logger": record.name,
        }
        data.update(_context.get() or {})
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if data["event"] != message:  # an explicit `event` extra: keep the message too
            data["message"] = message
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(data, default=str).decode()


class _JsonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure` installs, so a second call replaces it instead of adding one."""


def configure(level: int | str = logging.INFO) -> None:
    """JSON lines on standard error from the root logger (idempotent). Handlers installed by
    others (pytest's capture, for one) stay; a plain stream handler to stderr is replaced."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        plain_stderr = type(handler) is logging.StreamHandler and handler.stream in (
            sys.stderr,
            sys.__stderr__,
        )
        if isinstance(handler, _JsonHandler) or plain_stderr:
            root.removeHandler(handler)
    handler = _JsonHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
