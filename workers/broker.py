"""Asking the broker: is it there, and how deep are the queues (C9). The same questions reach
Redis and the embedded broker (kombu's SQLAlchemy transport on a SQLite file)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from models.core.settings import is_redis
from workers.app import EMAIL_QUEUE, EMBEDDED_SCHEMES, QUEUES, prepare_embedded

if TYPE_CHECKING:  # kombu and redis-py are imported by what uses them
    import redis
    from kombu.connection import Connection

# kombu's Redis transport keeps a queue as one list per priority step: the queue's own name
# for step 0, the name, a separator and the step for the others (kombu.transport.redis
# PRIORITY_STEPS, Channel.sep and _q_for_pri).
_PRIORITY_STEPS = (0, 3, 6, 9)
_PRIORITY_SEPARATOR = "\x06\x16"


def _options(url: str, timeout: float) -> dict[str, Any]:
    """One try, bounded by `timeout`: a broker that is down is reported, not waited for. The
    embedded transport takes none: it hands every option to create_engine, which refuses
    socket timeouts (and a SQLite file answers or fails at once)."""
    if is_redis(url):
        return {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0}
    return {}


def _connect(url: str, timeout: float) -> Connection:
    from kombu.connection import Connection

    prepare_embedded(url)
    return Connection(url, connect_timeout=timeout, transport_options=_options(url, timeout))


def ping(url: str, timeout: float) -> None:
    """Raise unless a task could be handed to the broker within about `timeout` seconds: the
    transport the workers use is loaded and connected through kombu, as a publisher does, so
    a transport that cannot load (kombu's Redis transport without `packaging`, issue 27) fails
    as an unreachable broker does. Redis then answers PING (kombu's channel asks it), the
    embedded broker by opening its database and reading a queue."""
    with _connect(url, timeout) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
        conn.default_channel  # noqa: B018  (Redis: the channel PINGs the server)
        if not is_redis(url):
            _depth(conn, EMAIL_QUEUE)


def depths(url: str, timeout: float = 2.0) -> dict[str, int]:
    """Messages waiting in each queue (not those a worker holds unacknowledged). A broker that
    does not answer raises: a depth of 0 would say the queues are empty."""
    if is_redis(url):
        return _redis_depths(url, timeout)
    with _connect(url, timeout) as conn:
        return {name: _depth(conn, name) for name in QUEUES}


def _redis(url: str, timeout: float) -> redis.Redis:
    """A redis-py client giving up after `timeout`, closed on leaving its block."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def _redis_lists(queue: str) -> list[str]:
    return [
        queue if step == 0 else f"{queue}{_PRIORITY_SEPARATOR}{step}" for step in _PRIORITY_STEPS
    ]


def _redis_depths(url: str, timeout: float) -> dict[str, int]:
    """The lengths of kombu's lists, in one round trip with redis-py alone: as for `ping`,
    a web process that /metrics scrapes does not import kombu for them (issue 15)."""
    with _redis(url, timeout) as client, client.pipeline(transaction=False) as pipe:
        for queue in QUEUES:
            for key in _redis_lists(queue):
                pipe.llen(key)
        lengths = iter(pipe.execute())
    return {queue: sum(next(lengths) for _ in _PRIORITY_STEPS) for queue in QUEUES}


def _depth(conn: Connection, queue: str) -> int:
    from kombu.exceptions import ChannelError

    try:
        return int(conn.default_channel.queue_declare(queue, passive=True).message_count)
    except ChannelError:  # never declared (Redis: no list until a message comes): empty
        return 0


def forget_taken(url: str) -> int:
    """Delete the messages workers have taken from the embedded broker; the count deleted.

    kombu's SQLAlchemy transport never deletes a message: a worker that takes one only marks
    it invisible (it is never read again; a message handed back is written anew). Kept, they
    grow the file and every poll of a worker scans past them (docs/benchmarks.md). Other
    brokers delete what is acked."""
    if not url.startswith(EMBEDDED_SCHEMES):
        return 0
    from kombu.connection import Connection

    with Connection(url) as conn:
        channel: Any = conn.default_channel
        message = channel.message_cls
        taken = channel.session.query(message).filter(message.visible.is_(False))
        count = int(taken.delete(synchronize_session=False))
        channel.session.commit()
    return count
