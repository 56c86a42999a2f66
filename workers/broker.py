"""Asking the broker: is it there, and how deep are the queues (C9)."""

from __future__ import annotations

from kombu.connection import Connection

from workers.app import EMAIL_QUEUE, MAINTENANCE_QUEUE

QUEUES = (EMAIL_QUEUE, MAINTENANCE_QUEUE)


def _options(timeout: float) -> dict[str, float]:
    """One try, bounded by `timeout`: a broker that is down is reported, not waited for."""
    return {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0}


def ping(url: str, timeout: float) -> None:
    """Raise unless the broker answers within about `timeout` seconds."""
    with Connection(url, connect_timeout=timeout, transport_options=_options(timeout)) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
        if url.startswith(("redis://", "rediss://")):
            conn.default_channel.client.ping()


def depths(url: str, timeout: float = 2.0) -> dict[str, int]:
    """Messages waiting in each queue (not those a worker holds unacknowledged)."""
    out: dict[str, int] = {}
    with Connection(url, connect_timeout=timeout, transport_options=_options(timeout)) as conn:
        channel = conn.default_channel
        for name in QUEUES:
            try:
                out[name] = int(channel.queue_declare(name, passive=True).message_count)
            except Exception:
                out[name] = 0
    return out
