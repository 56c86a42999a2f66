"""Configuration (C9): a value jobpost cannot use stops the process at once, naming the
variable, rather than failing on first use or doing harm (a negative retention age would
purge every finished application)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import api.server
from models.settings import VARIABLES, Settings
from workers.cli import main


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SMTP_PORT", "x"),
        ("SMTP_PORT", "70000"),
        ("WORKER_METRICS_PORT", "0"),
        ("JOBPOST_TIMEZONE", "Mars/Base"),
        ("JOBPOST_TIMEZONE", "../etc/passwd"),
        ("APPLY_RATE_LIMIT", "abc"),
        ("SMTP_TIMEOUT", "-5"),
        ("SMTP_TIMEOUT", "nan"),
        ("READY_TIMEOUT_SECONDS", "0"),
        ("OUTBOX_LEASE_SECONDS", "-3"),
        ("OUTBOX_SWEEP_GRACE_SECONDS", "-1"),
        ("DELIVERY_RETRY_BASE_SECONDS", "0"),
        ("DELIVERY_RETRY_HOURS", "abc"),
        ("DELIVERY_RETRY_HOURS", "inf"),
        ("APPLICATION_RETENTION_DAYS", "-2"),
        ("APPLICATION_RETENTION_DAYS", "1.5"),
        ("APPLICATION_RETENTION_DAYS", "3650000"),  # the purge's cut-off would be no date
        ("DELIVERY_RETRY_HOURS", "1e9"),
        ("OUTBOX_LEASE_SECONDS", "1e12"),
        ("JOB_CACHE_MB", "-1"),
        ("PUBLIC_BASE_URL", "jobs.example.com"),
    ],
)
def test_a_value_jobpost_cannot_use_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}='{value}': "):
        Settings.from_env({name: value})


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("DATABASE_URL", "jobpost:secret@db.internal/jobpost", "not a SQLAlchemy URL"),
        ("DATABASE_URL", "postgresql+psycopg2://jobpost:secret@db/jobpost", "(psycopg2)"),
        ("DATABASE_URL", "mysql://jobpost:secret@db/jobpost", "driver is not installed"),
        ("REDIS_URL", "jobpost:secret@redis.internal:6379", "not a redis://"),
        # a password's '@' not percent-encoded: its tail read as the host, or host and port
        ("DATABASE_URL", "postgresql://jobpost:Xy7@secret@db.internal/jobpost", "holds an '@'"),
        ("DATABASE_URL", "postgresql://jobpost:Xy7@k:secret@db:5432/jobpost", "not a number"),
        # PgBouncer's third mode (statement) would break every transaction of several
        ("DATABASE_URL", "postgresql://jobpost:secret@db/jobpost?pooler=statement", "pooler="),
        ("DATABASE_URL", "sqlite:///secret.db?pooler=transaction", "PostgreSQL URL only"),
    ],
)
def test_a_url_jobpost_cannot_use_is_refused_without_repeating_it(
    name: str, value: str, why: str
) -> None:
    """These URLs may hold a password: the line names the variable and the reason only."""
    with pytest.raises(ValueError, match=rf"^{name}: .*{re.escape(why)}") as refused:
        Settings.from_env({name: value})
    assert "secret" not in str(refused.value)


def test_postgres_urls_of_either_scheme_use_psycopg_3() -> None:
    for scheme in ("postgres", "postgresql"):
        url = Settings.from_env({"DATABASE_URL": f"{scheme}://u@db/j"}).database_url
        assert url == "postgresql+psycopg://u@db/j"


def test_empty_means_the_default_and_good_values_are_taken() -> None:
    assert Settings.from_env({"SMTP_PORT": "", "JOBPOST_TIMEZONE": ""}) == Settings.from_env({})
    # Every variable, strings too: an empty MAIL_FROM was an empty sender, an empty
    # APPLY_RATE_LIMIT stopped every command (docs/operations.md: "unset or empty means the
    # default").
    assert Settings.from_env(dict.fromkeys(VARIABLES, "")) == Settings.from_env({})
    settings = Settings.from_env(
        {
            "SMTP_PORT": "587",
            "JOBPOST_TIMEZONE": "America/Vancouver",
            "APPLICATION_RETENTION_DAYS": "0",
            "OUTBOX_SWEEP_GRACE_SECONDS": "0",
            "REDIS_URL": "rediss://cache.internal:6380/1",
            "PUBLIC_BASE_URL": "https://jobs.example.com/",
            "APPLY_RATE_LIMIT": "off",
        }
    )
    assert (settings.smtp_port, str(settings.timezone)) == (587, "America/Vancouver")
    assert settings.application_retention_days == 0
    assert settings.redis_url == "rediss://cache.internal:6380/1"
    assert settings.public_base_url == "https://jobs.example.com"


def never(*args: object, **kwargs: object) -> None:
    raise AssertionError("gunicorn started")


@pytest.mark.parametrize("command", [["serve"], ["employers", "list"]])
def test_every_command_refuses_to_start_in_one_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """C9's exit 1, before gunicorn starts (it would exit 3 once every worker had failed to
    boot on the rate limit, with a traceback each)."""
    monkeypatch.setattr(api.server, "serve", never)
    monkeypatch.setenv("APPLY_RATE_LIMIT", "10/fortnight")
    assert main(command) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        "jobpost: APPLY_RATE_LIMIT='10/fortnight': must be N/second, N/minute, N/hour or off\n"
    )
