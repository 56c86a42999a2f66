"""Configuration from environment variables only, each with a working default (C9)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

VAR = Path(os.environ.get("JOBPOST_VAR_DIR", "var"))
# Every environment variable jobpost reads: C9's, plus where local files go and a test aid.
VARIABLES = (
    "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "SMTP_HOST", "SMTP_PORT", "SMTP_USER",
    "SMTP_PASSWORD", "SMTP_STARTTLS", "SMTP_TIMEOUT", "MAIL_FROM", "JOBPOST_TIMEZONE",
    "PUBLIC_BASE_URL", "APPLICATION_RETENTION_DAYS", "APPLY_RATE_LIMIT",
    "OUTBOX_SWEEP_GRACE_SECONDS", "OUTBOX_LEASE_SECONDS", "DELIVERY_RETRY_BASE_SECONDS",
    "DELIVERY_RETRY_HOURS", "READY_TIMEOUT_SECONDS", "PROMETHEUS_MULTIPROC_DIR",
    "WORKER_METRICS_PORT", "JOBPOST_VAR_DIR", "JOBPOST_BEAT_EVERY_SECONDS", "JOB_CACHE_MB",
    "TRUSTED_PROXIES",
)  # fmt: skip


REDIS_SCHEMES = ("redis://", "rediss://")


def is_redis(url: str) -> bool:
    """Whether a broker URL names Redis (else it is the embedded broker)."""
    return url.startswith(REDIS_SCHEMES)


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(raw: str) -> tuple[Network, ...]:
    """TRUSTED_PROXIES: comma-separated addresses or CIDR networks; ValueError names an entry
    that is neither."""
    found = []
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"TRUSTED_PROXIES: {entry!r} is not an address or network") from None
    return tuple(found)


def database_url(raw: str) -> str:
    """Normalise a DATABASE_URL: postgres:// and postgresql:// use psycopg 3 (C9)."""
    for prefix in ("postgres://", "postgresql://"):
        if raw.startswith(prefix):
            return "postgresql+psycopg://" + raw[len(prefix) :]
    return raw


@dataclass(frozen=True)
class Settings:
    database_url: str
    broker_url: str
    redis_url: str | None
    smtp_host: str
    smtp_port: int
    smtp_user: str | None
    smtp_password: str | None
    smtp_starttls: bool
    smtp_timeout: float
    mail_from: str
    timezone: ZoneInfo
    public_base_url: str | None
    application_retention_days: int
    apply_rate_limit: str
    outbox_sweep_grace_seconds: float
    outbox_lease_seconds: float
    delivery_retry_base_seconds: float
    delivery_retry_hours: float
    ready_timeout_seconds: float
    prometheus_multiproc_dir: str
    worker_metrics_port: int
    job_cache_mb: float = 4.0  # per web process: job representations kept for GET (0: none)
    trusted_proxies: tuple[Network, ...] = ()  # the proxies in front of the web process

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        var = Path(e.get("JOBPOST_VAR_DIR", str(VAR)))
        broker = e.get("CELERY_BROKER_URL") or f"sqla+sqlite:///{var}/broker.sqlite"
        redis_default = broker if is_redis(broker) else None
        return cls(
            database_url=database_url(e.get("DATABASE_URL") or f"sqlite:///{var}/jobpost.db"),
            broker_url=broker,
            redis_url=e.get("REDIS_URL") or redis_default,
            smtp_host=e.get("SMTP_HOST", "127.0.0.1"),
            smtp_port=int(e.get("SMTP_PORT", "1025")),
            smtp_user=e.get("SMTP_USER") or None,
            smtp_password=e.get("SMTP_PASSWORD") or None,
            smtp_starttls=_bool(e.get("SMTP_STARTTLS", "false")),
            smtp_timeout=float(e.get("SMTP_TIMEOUT", "30")),
            mail_from=e.get("MAIL_FROM", "jobpost@localhost"),
            timezone=ZoneInfo(e.get("JOBPOST_TIMEZONE", "America/Toronto")),
            public_base_url=(e.get("PUBLIC_BASE_URL") or "").rstrip("/") or None,
            application_retention_days=int(e.get("APPLICATION_RETENTION_DAYS", "180")),
            apply_rate_limit=e.get("APPLY_RATE_LIMIT", "10/minute"),
            outbox_sweep_grace_seconds=float(e.get("OUTBOX_SWEEP_GRACE_SECONDS", "120")),
            outbox_lease_seconds=float(e.get("OUTBOX_LEASE_SECONDS", "300")),
            delivery_retry_base_seconds=float(e.get("DELIVERY_RETRY_BASE_SECONDS", "60")),
            delivery_retry_hours=float(e.get("DELIVERY_RETRY_HOURS", "24")),
            ready_timeout_seconds=float(e.get("READY_TIMEOUT_SECONDS", "2")),
            prometheus_multiproc_dir=e.get("PROMETHEUS_MULTIPROC_DIR", str(var / "prometheus")),
            worker_metrics_port=int(e.get("WORKER_METRICS_PORT", "9808")),
            job_cache_mb=float(e.get("JOB_CACHE_MB", "4")),
            trusted_proxies=networks(e.get("TRUSTED_PROXIES", "")),
        )
