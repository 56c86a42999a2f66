"""Bodies streamed as they are read (C15): a feed of any size is sent while its jobs are read
in batches, never held whole. The body is read on a connection of its own, opened when the
server starts sending it: the request's is closed by then (`api.middleware.SessionManager`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlalchemy import Connection
from sqlalchemy.orm import Session, sessionmaker

Writer = Callable[[Connection], Iterator[bytes]]


def streamed(sessions: sessionmaker[Session], write: Writer) -> Iterator[bytes]:
    """The bytes `write` makes over its own connection, closed at the end or when the reader
    leaves early (the server closes the generator). A HEAD never starts it, so it reads
    nothing."""
    with sessions() as session:
        yield from write(session.connection())
