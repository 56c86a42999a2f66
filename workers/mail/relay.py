"""How a copy is sent (C8, C9 `SMTP_*`): one SMTP connection per thread of each worker
process, kept between sends; a wall-clock deadline on each send; the relay's answers as
transient or permanent failures."""

from __future__ import annotations

import atexit
import os
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from workers.mail.mime import Outgoing


@dataclass(frozen=True)
class SmtpSettings:
    """The outgoing relay (C9 `SMTP_*` and `MAIL_FROM`)."""

    host: str = "127.0.0.1"
    port: int = 1025
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line
    starttls: bool = False
    timeout: float = 30.0
    mail_from: str = "jobpost@localhost"


class TransientFailure(Exception):
    """Connection refused, timeout or 4xx reply: retry later (C8)."""


class PermanentFailure(Exception):
    """A 5xx reply: never retry (C8)."""


class RecipientRefused(PermanentFailure):
    """A 5xx reply to RCPT: the relay says the address itself is no good (C22)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(_reply(code, text))
        self.code, self.text = code, text


class DeadlinePassed(TimeoutError):
    """The send's deadline came before the relay was done: a transient failure (C8)."""


class Clock:
    """The deadline (time.monotonic) of the send a connection is carrying, or None between
    sends; its sockets read it before each read and write."""

    def __init__(self) -> None:
        self.deadline: float | None = None

    def left(self, step: float | None) -> float | None:
        """The timeout for the next socket call: `step` (SMTP_TIMEOUT), or less if the
        deadline is nearer; DeadlinePassed once it has come."""
        if self.deadline is None:
            return step
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the send's deadline passed before the relay was done")
        return left if step is None else min(step, left)


class _Timed:
    """A socket whose every read and write waits at most SMTP_TIMEOUT, and never past the
    send's deadline: a relay that trickles a byte at a time cannot hold a send longer, since
    each read of a reply line is one call here."""

    clock = Clock()  # replaced by the connection's own as soon as it is made
    step: float | None = None

    def _limit(self) -> None:
        self.settimeout(self.clock.left(self.step))  # type: ignore[attr-defined]

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        self._limit()
        return super().recv(*args, **kwargs)  # type: ignore[misc]

    def recv_into(self, *args: Any, **kwargs: Any) -> Any:
        self._limit()
        return super().recv_into(*args, **kwargs)  # type: ignore[misc]

    def send(self, *args: Any, **kwargs: Any) -> Any:
        self._limit()
        return super().send(*args, **kwargs)  # type: ignore[misc]

    def sendall(self, *args: Any, **kwargs: Any) -> Any:
        self._limit()  # one timeout for the whole of sendall (Python 3.5 and later)
        return super().sendall(*args, **kwargs)  # type: ignore[misc]


class _TimedSocket(_Timed, socket.socket):
    pass


class _TimedSSLSocket(_Timed, ssl.SSLSocket):
    pass


class Connection(smtplib.SMTP):
    """smtplib.SMTP on timed sockets, plain and after STARTTLS, sharing one Clock; it notes
    whether the relay accepted the current message's MAIL (`mail_accepted`)."""

    def __init__(self, timeout: float, clock: Clock) -> None:
        self.clock = clock
        self.mail_accepted = False
        super().__init__(local_hostname=_local_hostname(), timeout=timeout)

    def mail(self, sender: str, options: Sequence[str] = ()) -> tuple[int, bytes]:
        self.mail_accepted = False
        reply = super().mail(sender, options)
        self.mail_accepted = reply[0] == 250
        return reply

    def connect(self, host: str = "localhost", port: int = 0, source_address: Any = None) -> Any:
        self._host = host  # what STARTTLS checks the certificate against (SNI too)
        return super().connect(host, port, source_address)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        plain = socket.create_connection((host, port), self.clock.left(timeout))
        sock = _TimedSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
        sock.clock, sock.step = self.clock, timeout
        return sock

    def starttls(  # type: ignore[override]  # only as _open calls it: no key or cert files
        self, *, context: ssl.SSLContext | None = None
    ) -> tuple[int, bytes]:
        context = context or ssl.create_default_context()
        context.sslsocket_class = _TimedSSLSocket
        if self.sock is not None:  # the handshake, too, waits no longer than the deadline
            self.sock.settimeout(self.clock.left(self.timeout))
        reply = super().starttls(context=context)
        assert isinstance(self.sock, _TimedSSLSocket)
        self.sock.clock, self.sock.step = self.clock, self.timeout
        return reply


# How long a connection is kept open unused: tasks come in bursts, and between bursts a
# connection held open would only take up one of the relay's (Postfix's smtpd_timeout is
# 300 s; whichever end gives up first, the next send opens a new one).
IDLE_SECONDS = 5.0


class Relay:
    """One SMTP connection, kept open between the sends of this process (C8, C9 `SMTP_*`).

    A worker sends its copies one after another; a connection of their own each (connect,
    greeting, EHLO, STARTTLS and login when configured, QUIT) costs both ends more than the
    message. A kept connection is kept only after a message went through on it, which ends
    the SMTP transaction (RFC 5321 4.1.4), so the next message starts with MAIL at once, with
    no RSET first (a round trip to the relay per copy). If the relay has closed it meanwhile
    (the MAIL finds the connection gone, or a 421), a new one is opened and the message sent
    on it: the relay accepted no MAIL on the old one, so nothing can have been delivered
    twice. Any failure during a send closes the connection (the next send opens a new one);
    settings that changed, or IDLE_SECONDS unused, close it too: a background thread QUITs
    it once idle. Each thread that sends has a Relay of its own (`Relays`)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._settings: SmtpSettings | None = None
        self._last_used = 0.0
        self._closer: threading.Thread | None = None

    def send(self, message: Outgoing, smtp: SmtpSettings, *, deadline: float | None = None) -> None:
        """Send by SMTP, done by `deadline` (time.monotonic) if given; raise TransientFailure
        or PermanentFailure with the server's reply."""
        clock = Clock()
        clock.deadline = deadline
        try:
            with self._lock:
                conn = self._take(smtp, clock)
                if conn is not None:
                    try:
                        with _ended_on_failure(conn):
                            _deliver(conn, message)
                    except (smtplib.SMTPException, OSError) as exc:
                        if not _closed_while_kept(conn, exc):
                            raise
                        conn = None  # nothing was sent on it: the message goes on a new one
                if conn is None:
                    conn = _open(smtp, clock)
                    with _ended_on_failure(conn):
                        _deliver(conn, message)
                conn.clock.deadline = None  # the idle QUIT has SMTP_TIMEOUT alone
                self._keep(conn, smtp)
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()))
            if 500 <= code < 600:
                said = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
                raise RecipientRefused(code, said) from exc
            raise _failure(code, text) from exc
        except smtplib.SMTPConnectError as exc:
            raise TransientFailure(_reply(exc.smtp_code, exc.smtp_error)) from exc
        except smtplib.SMTPNotSupportedError as exc:  # an OSError, but no retry mends the relay
            raise PermanentFailure(str(exc)) from exc
        except smtplib.SMTPResponseException as exc:
            raise _failure(exc.smtp_code, exc.smtp_error) from exc
        except OSError as exc:  # refused, timeouts, disconnects, TLS errors
            said = f"{type(exc).__name__}: {exc}"
            if deadline is not None and time.monotonic() >= deadline:
                raise TransientFailure(f"the send's deadline passed ({said})") from exc
            raise TransientFailure(said) from exc

    def close(self) -> None:
        """QUIT the kept connection, if any (at exit, or once idle)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            _close(conn)

    def forget(self) -> None:
        """In a forked child: the parent's connection is not this process's to use or QUIT."""
        self._lock = threading.Lock()
        conn, self._conn, self._closer = self._conn, None, None
        if conn is not None:
            conn.close()  # this process's descriptor only: the parent's connection stays

    def _take(self, smtp: SmtpSettings, clock: Clock) -> Connection | None:
        """The kept connection, if it is for these settings and not idle too long, on
        `clock`'s deadline; it is the caller's from then on, kept again only after a send
        that went through."""
        conn, self._conn = self._conn, None
        if conn is None:
            return None
        if smtp != self._settings or time.monotonic() - self._last_used >= self.idle_seconds:
            _close(conn)
            return None
        conn.clock.deadline = clock.deadline
        return conn

    def _keep(self, conn: Connection, smtp: SmtpSettings) -> None:
        self._conn, self._settings, self._last_used = conn, smtp, time.monotonic()
        if self._closer is None:
            self._closer = threading.Thread(
                target=self._close_when_idle, name="smtp-idle-close", daemon=True
            )
            self._closer.start()

    def _close_when_idle(self) -> None:
        while True:
            with self._lock:
                conn = self._conn
                left = self._last_used + self.idle_seconds - time.monotonic()
                if conn is None or left <= 0:
                    self._conn = self._closer = None
                    break
            time.sleep(left)
        if conn is not None:
            _close(conn)  # outside the lock: a silent relay holds up no send meanwhile


class Relays:
    """A Relay for each thread that sends: one connection per thread of a threads pool, one
    for a solo worker or a prefork child. A forked child starts with none of its parent's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._every: list[Relay] = []

    def mine(self) -> Relay:
        """This thread's Relay, made on its first send."""
        relay: Relay | None = getattr(self._local, "relay", None)
        if relay is None:
            relay = self._local.relay = Relay()
            with self._lock:
                self._every.append(relay)
        return relay

    def close(self) -> None:
        """QUIT every thread's kept connection (at the worker's or the child's end)."""
        with self._lock:
            relays = list(self._every)
        for relay in relays:
            relay.close()

    def forget(self) -> None:
        """In a forked child: the parent's connections are not this process's to use or QUIT,
        and the thread that forked keeps its thread-local Relay in the child."""
        relays, self._every = self._every, []
        self._lock, self._local = threading.Lock(), threading.local()
        for relay in relays:
            relay.forget()


RELAY = Relays()  # this process's connections: the worker's, or a pool child's after the fork
os.register_at_fork(after_in_child=RELAY.forget)
atexit.register(RELAY.close)


def send(message: Outgoing, smtp: SmtpSettings, *, deadline: float | None = None) -> None:
    """Send by SMTP over this thread's connection (`RELAY`), done by `deadline`
    (time.monotonic) if given; raise TransientFailure or PermanentFailure with the server's
    reply."""
    RELAY.mine().send(message, smtp, deadline=deadline)


# Refusals: the server is there and answering, so the conversation ends with QUIT.
_ANSWERED = (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused)


@lru_cache(maxsize=1)
def _local_hostname() -> str:
    """The name given in EHLO: what smtplib would look up for every connection, once."""
    return socket.getfqdn()


def _open(smtp: SmtpSettings, clock: Clock) -> Connection:
    """A new connection, greeted, with STARTTLS and login when configured."""
    conn = Connection(smtp.timeout, clock)
    with _ended_on_failure(conn):
        conn.connect(smtp.host, smtp.port)
        if smtp.starttls:
            conn.starttls(context=ssl.create_default_context())
            conn.ehlo()
        if smtp.user is not None:
            conn.login(smtp.user, smtp.password or "")
    return conn


@contextmanager
def _ended_on_failure(conn: smtplib.SMTP) -> Iterator[None]:
    """Whatever fails on `conn` ends it: with QUIT after a refusal (the server is there and
    answering), without after a timeout, a lost connection or the task's time limit (no
    reply to QUIT is coming either, so none is awaited)."""
    try:
        yield
    except _ANSWERED:
        _close(conn)
        raise
    except BaseException:
        conn.close()
        raise


def _closed_while_kept(conn: Connection, exc: BaseException) -> bool:
    """Whether a kept connection's send failed because the relay had ended it while it was
    kept (gone, or a 421 to MAIL), before the relay accepted the MAIL: then nothing was sent
    on it. smtplib reports a timeout as a disconnection too; that one is the relay's
    slowness (or the send's deadline), not an ended connection."""
    if conn.mail_accepted:
        return False
    if isinstance(exc, smtplib.SMTPSenderRefused):
        return exc.smtp_code == 421
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return not isinstance(exc.__context__, TimeoutError)
    return False


def _deliver(conn: smtplib.SMTP, message: Outgoing) -> None:
    options: tuple[str, ...] = ()
    if message.smtputf8:  # as send_message does
        conn.ehlo_or_helo_if_needed()
        if not conn.has_extn("smtputf8"):
            raise smtplib.SMTPNotSupportedError(
                "an address is not ASCII and needs SMTPUTF8, which the relay does not offer"
            )
        options = ("SMTPUTF8", "BODY=8BITMIME")
    conn.sendmail(message.sender, list(message.recipients), message.data, options)


def _close(conn: smtplib.SMTP) -> None:
    """QUIT politely; a failing QUIT must not undo a delivery already accepted."""
    try:
        conn.quit()
    except (smtplib.SMTPException, OSError):
        pass
    finally:
        conn.close()


def _reply(code: int, text: bytes | str) -> str:
    message = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return f"{code} {message}"


def _failure(code: int, text: bytes | str) -> TransientFailure | PermanentFailure:
    reply = _reply(code, text)
    return PermanentFailure(reply) if 500 <= code < 600 else TransientFailure(reply)
