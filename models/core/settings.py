"""Configuration from environment variables only, each with a working default (C9)."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from email.utils import getaddresses
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from models.core import checks

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

# Every environment variable jobpost reads: C9's, plus where local files go, a test aid, and
# gunicorn's own GUNICORN_CMD_ARGS, which `jobpost serve` hands to gunicorn. This module is
# the only one that reads the environment: each process's entry point calls
# Settings.from_env() once and passes the settings down.
VARIABLES = (
    "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "SMTP_HOST", "SMTP_PORT", "SMTP_USER",
    "SMTP_PASSWORD", "SMTP_STARTTLS", "SMTP_TIMEOUT", "MAIL_FROM", "JOBPOST_TIMEZONE",
    "PUBLIC_BASE_URL", "APPLICATION_RETENTION_DAYS", "APPLY_RATE_LIMIT",
    "OUTBOX_SWEEP_GRACE_SECONDS", "OUTBOX_LEASE_SECONDS", "DELIVERY_RETRY_BASE_SECONDS",
    "DELIVERY_RETRY_HOURS", "READY_TIMEOUT_SECONDS", "PROMETHEUS_MULTIPROC_DIR",
    "WORKER_METRICS_PORT", "JOBPOST_VAR_DIR", "JOBPOST_BEAT_EVERY_SECONDS", "JOB_CACHE_MB",
    "SEARCH_PAGE_SECONDS",
    "TRUSTED_PROXIES", "GUNICORN_CMD_ARGS", "SYNC_RETENTION_DAYS", "SYNC_LEASE_SECONDS",
    "WEBHOOK_ALLOW_HTTP", "WEBHOOK_ALLOW_PRIVATE", "WEBHOOK_ALLOWED_PORTS",
    "WEBHOOK_ENDPOINT_IN_FLIGHT", "WEBHOOK_EMPLOYER_IN_FLIGHT", "WEBHOOK_TEST_RATE_LIMIT",
    "WEBHOOK_RETRY_SCHEDULE", "JOBPOST_SECRET_KEY", "CHANGE_FEED_LAG_SECONDS",
    "CHANGE_FEED_TOMBSTONE_DAYS",
    "REPORTS_EMAIL", "REPORT_REVIEW_DAYS", "PRIVACY_CONTACT",
    "INDEXNOW_KEY", "INDEXNOW_ENDPOINT", "GOOGLE_SERVICE_ACCOUNT_FILE", "GOOGLE_INDEXING_ENDPOINT",
    "GOOGLE_INDEXING_DAILY_QUOTA",
    "JOBPOST_SECRET_KEY_FILE", "SMTP_PASSWORD_FILE", "DATABASE_URL_FILE",
    "CELERY_BROKER_URL_FILE", "REDIS_URL_FILE",
)  # fmt: skip

# The settings that may hold a secret (a key, a password, a URL with one in it): each may be
# given instead as NAME_FILE, the path of a file that holds the value (a Docker or Kubernetes
# secret), so that it appears in no process's environment.
SECRET_VARIABLES = (
    "JOBPOST_SECRET_KEY", "SMTP_PASSWORD", "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL",
)  # fmt: skip
FILE_SUFFIX = "_FILE"


def from_files(e: Mapping[str, str]) -> Mapping[str, str]:
    """`e` with each secret given as NAME_FILE read into NAME: the file's text, less one
    trailing newline. Both set, an empty file or one that cannot be read is a ValueError
    naming the variables (never the value)."""
    found = dict(e)
    for name in SECRET_VARIABLES:
        path = e.get(name + FILE_SUFFIX)
        if not path:
            continue
        if e.get(name):
            raise ValueError(f"{name} and {name}{FILE_SUFFIX} are both set: set one of them")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            why = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise ValueError(f"{name}{FILE_SUFFIX}: cannot read {path!r} ({why})") from None
        value = text.removesuffix("\n").removesuffix("\r")
        if not value:
            raise ValueError(f"{name}{FILE_SUFFIX}: the file {path!r} is empty")
        found[name] = value
    return found


REDIS_SCHEMES = ("redis://", "rediss://")


def is_redis(url: str) -> bool:
    """Whether a broker URL names Redis (else it is the embedded broker)."""
    return url.startswith(REDIS_SCHEMES)


BOOLEANS = {
    "true": True, "1": True, "yes": True, "on": True,
    "false": False, "0": False, "no": False, "off": False,
}  # fmt: skip


def _boolean(raw: str) -> bool:
    """Exactly one of BOOLEANS' words, any case: a typo (`ture`) is refused, not taken as off."""
    try:
        return BOOLEANS[raw.strip().lower()]
    except KeyError:
        raise ValueError("not true or false (true/false, 1/0, yes/no, on/off)") from None


T = TypeVar("T")


def _read(
    e: Mapping[str, str],
    name: str,
    default: str,
    parse: Callable[[str], T],
    *,
    secret: bool = False,
) -> T:
    """A variable through `parse`, unset or empty meaning `default`. A value it refuses is a
    ValueError that names the variable, so a process refuses to start with one line an
    operator can act on, rather than fail on first use (or, for a negative age or lease, do
    harm: C9). A `secret` value (a URL that may hold a password) is not repeated."""
    raw = e.get(name) or default
    try:
        return parse(raw)
    except (ValueError, KeyError) as error:  # ZoneInfoNotFoundError is a KeyError
        shown = name if secret else f"{name}={raw!r}"
        raise ValueError(f"{shown}: {_why(error)}") from None


def _why(error: Exception) -> str:
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


# The longest span a setting of days, hours or seconds may give: dates a hundred years on are
# still dates, where ten thousand years on is past what a datetime holds (the purge, a retry
# or a lease would fail on every run, with an OverflowError).
MOST_SECONDS = 100 * 366 * 86400


def _number(
    low: float, *, above: bool = False, whole: bool = False, most: float | None = None
) -> Callable[[str], float]:
    """A finite number at least `low` (above it when `above`) and at most `most`, a whole one
    when `whole`."""
    bound = f"{'above' if above else 'at least'} {low:g}"
    if most is not None:
        bound += f" and at most {most:,.0f}"
    kind = "a whole number" if whole else "a number"

    def parse(raw: str) -> float:
        try:
            value = int(raw) if whole else float(raw)
        except ValueError:
            raise ValueError(f"not {kind}") from None
        too_high = most is not None and value > most
        if not math.isfinite(value) or value < low or (above and value == low) or too_high:
            raise ValueError(f"must be {bound}")
        return value

    return parse


def _span(unit_seconds: int, *, above: bool = False, whole: bool = False) -> Callable[[str], float]:
    """A span of time in units of `unit_seconds`, up to MOST_SECONDS."""
    return _number(0, above=above, whole=whole, most=MOST_SECONDS // unit_seconds)


def _port(raw: str) -> int:
    port = int(_number(1, whole=True)(raw))
    if port > 65535:
        raise ValueError("not a TCP port (1 to 65535)")
    return port


def _zone(raw: str) -> ZoneInfo:
    try:
        return ZoneInfo(raw)
    except (ValueError, ZoneInfoNotFoundError):
        raise ValueError("not an IANA time zone (America/Toronto, say)") from None


PERIODS = {"second": 1, "minute": 60, "hour": 3600}
RULE = re.compile(r"\s*(\d+)\s*/\s*(second|minute|hour)\s*")


def rate_limit(rule: str) -> tuple[int, int] | None:
    """APPLY_RATE_LIMIT: "10/minute" → (10, 60); "off" → None."""
    if rule.strip().lower() == "off":
        return None
    match = RULE.fullmatch(rule)
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"APPLY_RATE_LIMIT={rule!r}: must be N/second, N/minute, N/hour or off")
    return int(match.group(1)), PERIODS[match.group(2)]


# The default's domain: a relay on this machine. C4's address rules want a dotted domain.
LOCAL_SENDER_DOMAIN = "localhost"


def _api_limits(e: Mapping[str, str]) -> tuple[tuple[str, str, str], ...]:
    """C23's limits by plan: API_RATE_LIMIT_STANDARD and API_RATE_LIMIT_UNLIMITED."""
    # A sync run's 10,000 jobs count one each (C11): a minute's quota holds one run.
    standard = _read(e, "API_RATE_LIMIT_STANDARD", "12000/minute,24000/minute", _pair)
    unlimited = _read(e, "API_RATE_LIMIT_UNLIMITED", "48000/minute,96000/minute", _pair)
    return (("standard", *standard), ("unlimited", *unlimited))


def _pair(raw: str) -> tuple[str, str]:
    """API_RATE_LIMIT_<PLAN>: the limit per key, then per employer (C23), each N/second,
    N/minute, N/hour or off: `12000/minute,24000/minute`."""
    parts = [p.strip() for p in raw.split(",")]
    if len(parts) != 2 or not all(p.lower() == "off" or RULE.fullmatch(p) for p in parts):
        raise ValueError("two rules, per key then per employer, such as 600/minute,1200/minute")
    if any(p.lower() != "off" and int(p.split("/")[0]) < 1 for p in parts):
        raise ValueError("a limit is at least 1")
    return parts[0], parts[1]


def _bounce_domain(raw: str) -> str | None:
    """BOUNCE_DOMAIN: a host name whose mail `jobpost bounces` receives (C22); empty: none."""
    if not raw:
        return None
    labels = raw.lower().rstrip(".").split(".")
    label = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
    if len(raw) > 200 or len(labels) < 2 or not all(label.fullmatch(x) for x in labels):
        raise ValueError("not a domain name (bounces.example.com)")
    return ".".join(labels)


def _sender(raw: str) -> str:
    """MAIL_FROM: one address, bare or with a display name (`Jobs <jobs@example.com>`), by
    the address rules of C4 (models.core.checks.email). Checked at start: a sender the relay
    refuses would fail every copy, one by one."""
    found = getaddresses([raw])
    # The parser drops what it cannot read (a space inside the address, say): the address
    # must be there as written.
    control = any(ord(c) < 32 or ord(c) == 127 for c in raw)
    if len(found) != 1 or found[0][1] not in raw or control:
        raise ValueError("not one email address (jobs@example.com or Jobs <jobs@example.com>)")
    local, _, domain = found[0][1].rpartition("@")
    if domain.lower() == LOCAL_SENDER_DOMAIN:  # allowed, as C9's default; the rest is checked
        domain = "example.com"
    try:
        checks.email(f"{local}@{domain}", "MAIL_FROM", max_len=254)
    except checks.Invalid:
        raise ValueError(
            "not a valid email address (jobs@example.com or Jobs <jobs@example.com>)"
        ) from None
    return raw


def _recipient(raw: str) -> str | None:
    """REPORTS_EMAIL: one bare address (C4's rules), or unset: no report is emailed (C13)."""
    if not raw.strip():
        return None
    try:
        return checks.email(raw.strip(), "REPORTS_EMAIL", max_len=254)
    except checks.Invalid:
        raise ValueError("not one valid email address (reports@example.com)") from None


PRIVACY_CONTACT_MAX = 500


def _contact(raw: str) -> str | None:
    """PRIVACY_CONTACT: text shown as given on the privacy policy (C13): one line of at most
    PRIVACY_CONTACT_MAX characters; unset means the operator and MAIL_FROM."""
    text = raw.strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("must be one line of text, without control characters")
    if len(text) > PRIVACY_CONTACT_MAX:
        raise ValueError(f"must be at most {PRIVACY_CONTACT_MAX} characters")
    return text or None


def _every(raw: str) -> float | None:
    """JOBPOST_BEAT_EVERY_SECONDS: a positive number of seconds, or unset."""
    return _span(1, above=True)(raw) if raw.strip() else None


def _words(raw: str) -> tuple[str, ...]:
    """A command line's options, split as a shell splits them (GUNICORN_CMD_ARGS)."""
    try:
        return tuple(shlex.split(raw))
    except ValueError as e:  # "No closing quotation"
        raise ValueError(f"cannot be split as a shell would ({str(e).lower()})") from None


def _rule(raw: str) -> str:
    rate_limit(raw)
    return raw


def _limit(raw: str) -> str:
    """A rate rule as APPLY_RATE_LIMIT's, for another variable (its name comes from _read)."""
    try:
        rate_limit(raw)
    except ValueError:
        raise ValueError("must be N/second, N/minute, N/hour or off") from None
    return raw


PortRanges = tuple[tuple[int, int], ...]


def _port_ranges(raw: str) -> PortRanges:
    """WEBHOOK_ALLOWED_PORTS: ports and ranges, comma-separated (`9000,10000-10099`)."""
    ranges = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = _port(low.strip()), _port((high if dash else low).strip())
        except ValueError:
            raise ValueError(f"{part!r} is not a port or a range (8000-8999)") from None
        if first > last:
            raise ValueError(f"{part!r}: the range goes from low to high")
        ranges.append((first, last))
    return tuple(ranges)


def _schedule(raw: str) -> tuple[float, ...]:
    """WEBHOOK_RETRY_SCHEDULE: seconds between attempts, comma-separated (C12)."""
    delays = []
    for part in raw.split(","):
        try:
            delays.append(_span(1)(part.strip()))
        except ValueError as e:
            raise ValueError(f"delay {part.strip()!r}: {e} (seconds, comma-separated)") from None
    return tuple(delays)


# A command that prints a key JOBPOST_SECRET_KEY takes: the key as text, not bytes' repr.
MAKE_KEY = (
    "python3 -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)


def _fernet_key(raw: str) -> str | None:
    """JOBPOST_SECRET_KEY: a Fernet key (url-safe base64 of 32 bytes), checked at start so a
    typo stops the process rather than every webhook write (C12)."""
    if not raw:
        return None
    from models.webhooks.secrets import valid_key

    if not valid_key(raw):
        raise ValueError(
            f"not a Fernet key (url-safe base64 of 32 bytes; make one with `{MAKE_KEY}`)"
        )
    return raw


INDEXNOW_KEY = re.compile(r"[A-Za-z0-9-]{8,128}")  # the protocol's key: 8 to 128 of these


def _indexnow_key(raw: str) -> str | None:
    if raw and not INDEXNOW_KEY.fullmatch(raw):
        raise ValueError("not 8 to 128 letters, digits or dashes (IndexNow's key)")
    return raw or None


def _endpoint(raw: str) -> str:
    if urlsplit(raw).scheme not in ("http", "https") or not urlsplit(raw).hostname:
        raise ValueError("not an absolute http or https URL")
    return raw


def _service_account(raw: str) -> Path | None:
    """A Google service account's key file (JSON, as the console downloads it): read at
    start, so that a wrong path stops the process, not each batch of notifications (C18)."""
    if not raw:
        return None
    import json

    try:
        info = json.loads(Path(raw).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read it ({error.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("not a JSON file") from None
    missing = [
        k
        for k in ("client_email", "private_key", "token_uri")
        if not isinstance(info, dict) or not isinstance(info.get(k), str)
    ]
    if missing:
        raise ValueError(f"not a service account key file (no {', '.join(missing)})")
    return Path(raw)


def _redis(raw: str) -> str | None:
    if raw and not raw.startswith((*REDIS_SCHEMES, "unix://")):
        raise ValueError("not a redis://, rediss:// or unix:// URL")
    return raw or None


def _base_url(raw: str) -> str | None:
    url = raw.rstrip("/")
    if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
        raise ValueError("not an absolute http or https URL (https://jobs.example.com)")
    return url or None


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


# A password with an '@' not percent-encoded spills into the host (and the port), where
# SQLAlchemy's and the driver's messages repeat it.
UNESCAPED = " (an '@' in the user or password is written %40)"


def _database(raw: str) -> str:
    """A URL SQLAlchemy reads, whose driver is installed (psycopg2 is not: psycopg 3 is)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    url = database_url(raw)
    try:
        parsed = make_url(url)
        parsed.get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError):
        raise ValueError("not a SQLAlchemy URL (sqlite:///… or postgresql://…)") from None
    except ValueError:  # int() of the port, whose message repeats it: a password's tail, say
        raise ValueError(f"its port is not a number{UNESCAPED}") from None
    except ImportError as e:
        raise ValueError(f"its driver is not installed ({e.name}); use postgresql://") from None
    if "@" in (parsed.host or ""):  # the driver would repeat this "host" in every error
        raise ValueError(f"its host holds an '@'{UNESCAPED}")
    _pooler(parsed)
    return url


def _pooler(parsed: URL) -> None:
    """DATABASE_URL's own `pooler` parameter: on a PostgreSQL URL, the pool mode of the
    pooler in between (models.db.engines)."""
    from models.db.engines import POOL_MODES, POOLER

    mode = parsed.query.get(POOLER)
    if mode is not None and (parsed.get_backend_name() != "postgresql" or mode not in POOL_MODES):
        raise ValueError(f"its {POOLER}= is {' or '.join(POOL_MODES)}, on a PostgreSQL URL only")


HIDDEN = "***"
PASSWORD_PARAMETER = re.compile(r"(?i)(\bpassword=)[^&]*")  # ?password=… in a URL's query


def hide_password(url: str | None) -> str | None:
    """`url` with its password, if it holds one, shown as HIDDEN: for a repr, a log line or
    an error. The last '@' ends the user and password, as drivers read them."""
    if not url:
        return url
    netloc = urlsplit(url).netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        url = url.replace(netloc, f"{userinfo.split(':', 1)[0]}:{HIDDEN}@{host}", 1)
    return PASSWORD_PARAMETER.sub(rf"\1{HIDDEN}", url)


# Shown through hide_password in a repr; SMTP_PASSWORD is not shown at all.
URL_FIELDS = ("database_url", "broker_url", "redis_url")
SECRET_FIELDS = ("smtp_password", "secret_key")


@dataclass(frozen=True, repr=False)
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
    search_page_seconds: float = 10.0  # per web process: how long a search page is kept (C17)
    trusted_proxies: tuple[Network, ...] = ()  # the proxies in front of the web process
    var_dir: Path = Path("var")  # local state of the defaults (JOBPOST_VAR_DIR)
    beat_every_seconds: float | None = None  # tests and demos: every beat entry this often
    gunicorn_cmd_args: tuple[str, ...] = ()  # gunicorn options for `jobpost serve`
    # C10: how far behind the present the change feeds stay, and so how long a transaction
    # that changes jobs or applications may last (models.db.feed).
    change_feed_lag_seconds: float = 5.0
    change_feed_tombstone_days: int = 30  # C10, C14: deleted jobs stay in the feed this long
    sync_retention_days: int = 30  # C11, C14: finished runs are purged after this
    sync_lease_seconds: float = 300  # C11, C14: a running sync's lease
    webhook_allow_http: bool = False  # C12: development and tests only
    webhook_allow_private: bool = False  # C12: development and tests only
    webhook_retry_schedule: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)
    webhook_allowed_ports: PortRanges = ()  # C12: beyond the web ports
    webhook_endpoint_in_flight: int = 2  # C12: deliveries sending at once to one endpoint
    webhook_employer_in_flight: int = 8  # C12: … to all of one employer's endpoints
    webhook_test_rate_limit: str = "10/minute"  # C12: tests and retries, per endpoint
    secret_key: str | None = None  # JOBPOST_SECRET_KEY; else the key file (models.webhooks.secrets)
    reports_email: str | None = None  # C13: where fraud reports go; None: no email
    report_review_days: int = 2  # C13: stated on the fraud policy page
    privacy_contact: str | None = None  # C13: None: "the operator of this service", MAIL_FROM
    bounce_domain: str | None = None  # C22: the copies' VERP senders; None: MAIL_FROM
    # C23: (plan, per key, per employer) limits of the keyed API, each a rule or "off".
    api_rate_limits: tuple[tuple[str, str, str], ...] = (
        ("standard", "12000/minute", "24000/minute"),
        ("unlimited", "48000/minute", "96000/minute"),
    )
    # C18: each search engine is told of job pages only once configured.
    indexnow_key: str | None = None
    indexnow_endpoint: str = "https://api.indexnow.org/indexnow"
    google_service_account_file: Path | None = None
    google_indexing_endpoint: str = "https://indexing.googleapis.com/v3/urlNotifications:publish"
    google_indexing_daily_quota: int = 200  # Google's default quota of publish requests a day

    def __repr__(self) -> str:
        """Every field, but no password: URLs show theirs as HIDDEN, SMTP_PASSWORD is HIDDEN."""
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in URL_FIELDS:
                value = hide_password(value)
            elif f.name in SECRET_FIELDS and value is not None:
                value = HIDDEN
            shown.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(shown)})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = from_files(os.environ if env is None else env)
        var = Path(e.get("JOBPOST_VAR_DIR") or "var")
        broker = e.get("CELERY_BROKER_URL") or f"sqla+sqlite:///{var}/broker.sqlite"
        redis_default = broker if is_redis(broker) else None
        return cls(
            database_url=_read(
                e, "DATABASE_URL", f"sqlite:///{var}/jobpost.db", _database, secret=True
            ),
            broker_url=broker,
            redis_url=_read(e, "REDIS_URL", "", _redis, secret=True) or redis_default,
            smtp_host=e.get("SMTP_HOST") or "127.0.0.1",
            smtp_port=_read(e, "SMTP_PORT", "1025", _port),
            smtp_user=e.get("SMTP_USER") or None,
            smtp_password=e.get("SMTP_PASSWORD") or None,
            smtp_starttls=_read(e, "SMTP_STARTTLS", "false", _boolean),
            smtp_timeout=_read(e, "SMTP_TIMEOUT", "30", _span(1, above=True)),
            mail_from=_read(e, "MAIL_FROM", "jobpost@localhost", _sender),
            timezone=_read(e, "JOBPOST_TIMEZONE", "America/Toronto", _zone),
            public_base_url=_read(e, "PUBLIC_BASE_URL", "", _base_url),
            application_retention_days=int(
                _read(e, "APPLICATION_RETENTION_DAYS", "180", _span(86400, whole=True))
            ),
            apply_rate_limit=_rule(e.get("APPLY_RATE_LIMIT") or "10/minute"),
            outbox_sweep_grace_seconds=_read(e, "OUTBOX_SWEEP_GRACE_SECONDS", "120", _span(1)),
            outbox_lease_seconds=_read(e, "OUTBOX_LEASE_SECONDS", "300", _span(1, above=True)),
            delivery_retry_base_seconds=_read(
                e, "DELIVERY_RETRY_BASE_SECONDS", "60", _span(1, above=True)
            ),
            delivery_retry_hours=_read(e, "DELIVERY_RETRY_HOURS", "24", _span(3600)),
            ready_timeout_seconds=_read(e, "READY_TIMEOUT_SECONDS", "2", _span(1, above=True)),
            prometheus_multiproc_dir=e.get("PROMETHEUS_MULTIPROC_DIR") or str(var / "prometheus"),
            worker_metrics_port=_read(e, "WORKER_METRICS_PORT", "9808", _port),
            job_cache_mb=_read(e, "JOB_CACHE_MB", "4", _number(0)),
            search_page_seconds=_read(e, "SEARCH_PAGE_SECONDS", "10", _number(0, most=60)),
            trusted_proxies=networks(e.get("TRUSTED_PROXIES", "")),
            var_dir=var,
            beat_every_seconds=_read(e, "JOBPOST_BEAT_EVERY_SECONDS", "", _every),
            gunicorn_cmd_args=_read(e, "GUNICORN_CMD_ARGS", "", _words),
            change_feed_lag_seconds=_read(
                e, "CHANGE_FEED_LAG_SECONDS", "5", _number(0, above=True, most=3600)
            ),
            change_feed_tombstone_days=int(
                _read(e, "CHANGE_FEED_TOMBSTONE_DAYS", "30", _span(86400, above=True, whole=True))
            ),
            sync_retention_days=int(
                _read(e, "SYNC_RETENTION_DAYS", "30", _span(86400, whole=True))
            ),
            sync_lease_seconds=_read(e, "SYNC_LEASE_SECONDS", "300", _span(1, above=True)),
            webhook_allow_http=_read(e, "WEBHOOK_ALLOW_HTTP", "false", _boolean),
            webhook_allow_private=_read(e, "WEBHOOK_ALLOW_PRIVATE", "false", _boolean),
            webhook_retry_schedule=_read(
                e, "WEBHOOK_RETRY_SCHEDULE", "5,300,1800,7200,18000,36000,36000", _schedule
            ),
            webhook_allowed_ports=_read(e, "WEBHOOK_ALLOWED_PORTS", "", _port_ranges),
            webhook_endpoint_in_flight=int(
                _read(e, "WEBHOOK_ENDPOINT_IN_FLIGHT", "2", _number(1, whole=True, most=1000))
            ),
            webhook_employer_in_flight=int(
                _read(e, "WEBHOOK_EMPLOYER_IN_FLIGHT", "8", _number(1, whole=True, most=10000))
            ),
            webhook_test_rate_limit=_read(e, "WEBHOOK_TEST_RATE_LIMIT", "10/minute", _limit),
            secret_key=_read(e, "JOBPOST_SECRET_KEY", "", _fernet_key, secret=True),
            reports_email=_read(e, "REPORTS_EMAIL", "", _recipient),
            report_review_days=int(
                _read(e, "REPORT_REVIEW_DAYS", "2", _number(1, whole=True, most=365))
            ),
            privacy_contact=_read(e, "PRIVACY_CONTACT", "", _contact),
            bounce_domain=_read(e, "BOUNCE_DOMAIN", "", _bounce_domain),
            api_rate_limits=_api_limits(e),
            **_search_engines(e),
        )


def _search_engines(e: Mapping[str, str]) -> dict[str, Any]:
    """C18's settings. A channel names the job pages by PUBLIC_BASE_URL, so one configured
    without it is refused at start rather than notifying a listen address."""
    found: dict[str, Any] = {
        "indexnow_key": _read(e, "INDEXNOW_KEY", "", _indexnow_key),
        "indexnow_endpoint": _read(
            e, "INDEXNOW_ENDPOINT", "https://api.indexnow.org/indexnow", _endpoint
        ),
        "google_service_account_file": _read(
            e, "GOOGLE_SERVICE_ACCOUNT_FILE", "", _service_account
        ),
        "google_indexing_endpoint": _read(
            e,
            "GOOGLE_INDEXING_ENDPOINT",
            "https://indexing.googleapis.com/v3/urlNotifications:publish",
            _endpoint,
        ),
        "google_indexing_daily_quota": int(
            _read(e, "GOOGLE_INDEXING_DAILY_QUOTA", "200", _number(1, whole=True, most=10**6))
        ),
    }
    for name, field in (
        ("INDEXNOW_KEY", "indexnow_key"),
        ("GOOGLE_SERVICE_ACCOUNT_FILE", "google_service_account_file"),
    ):
        if found[field] is not None and not e.get("PUBLIC_BASE_URL"):
            raise ValueError(f"{name} is set but PUBLIC_BASE_URL is not: set the site's address")
    return found
