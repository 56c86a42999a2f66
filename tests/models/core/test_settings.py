"""Configuration (C9): a value jobpost cannot use stops the process at once, naming the
variable, rather than failing on first use or doing harm (a negative retention age would
purge every finished application)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import api.server
from models.core import logs
from models.core.settings import VARIABLES, Settings, hide_password
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
        ("SEARCH_PAGE_SECONDS", "-1"),
        ("SEARCH_PAGE_SECONDS", "61"),  # longer than the page's own max-age (C17)
        ("PUBLIC_BASE_URL", "jobs.example.com"),
        ("SMTP_STARTTLS", "ture"),  # was taken as off, silently
        ("SMTP_STARTTLS", "2"),
        ("MAIL_FROM", "jobs"),
        ("JOBPOST_BEAT_EVERY_SECONDS", "0"),
        ("GUNICORN_CMD_ARGS", '--timeout "60'),
        ("CHANGE_FEED_LAG_SECONDS", "0"),  # C14: positive
        ("CHANGE_FEED_LAG_SECONDS", "-5"),
        ("CHANGE_FEED_LAG_SECONDS", "soon"),
        ("CHANGE_FEED_LAG_SECONDS", "nan"),
        ("CHANGE_FEED_LAG_SECONDS", "86400"),  # at most an hour
        ("WEBHOOK_ALLOW_HTTP", "ture"),
        ("WEBHOOK_ALLOW_PRIVATE", "2"),
        ("WEBHOOK_RETRY_SCHEDULE", "5,,300"),
        ("WEBHOOK_RETRY_SCHEDULE", "5,-1"),
        ("WEBHOOK_RETRY_SCHEDULE", "5,1e12"),
        ("REPORTS_EMAIL", "reports"),  # C13, C14
        ("REPORTS_EMAIL", "a@example.com, b@example.com"),
        ("REPORT_REVIEW_DAYS", "0"),
        ("REPORT_REVIEW_DAYS", "1.5"),
        ("REPORT_REVIEW_DAYS", "366"),
        ("PRIVACY_CONTACT", "x" * 501),
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


def test_a_secret_key_that_is_no_fernet_key_is_refused_without_repeating_it() -> None:
    for value in ("secret-but-short", "c2VjcmV0" * 6, "é" * 44):
        with pytest.raises(ValueError, match=r"^JOBPOST_SECRET_KEY: not a Fernet key") as refused:
            Settings.from_env({"JOBPOST_SECRET_KEY": value})
        assert value not in str(refused.value)


def test_webhook_settings_are_read() -> None:
    key = "x" * 43 + "="  # url-safe base64 of 32 bytes
    settings = Settings.from_env(
        {
            "WEBHOOK_ALLOW_HTTP": "true",
            "WEBHOOK_ALLOW_PRIVATE": "yes",
            "WEBHOOK_RETRY_SCHEDULE": " 1, 2.5 ,60",
            "JOBPOST_SECRET_KEY": key,
        }
    )
    assert (settings.webhook_allow_http, settings.webhook_allow_private) == (True, True)
    assert settings.webhook_retry_schedule == (1, 2.5, 60)
    assert settings.secret_key == key and key not in repr(settings)
    default = Settings.from_env({})
    assert default.webhook_retry_schedule == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert (default.webhook_allow_http, default.webhook_allow_private) == (False, False)
    assert default.secret_key is None


def test_the_tenant_caps_and_ports_of_webhooks_are_read() -> None:
    """C12: in-flight caps, the ports beyond the web ports, the rate of tests and retries."""
    settings = Settings.from_env(
        {
            "WEBHOOK_ENDPOINT_IN_FLIGHT": "3",
            "WEBHOOK_EMPLOYER_IN_FLIGHT": "12",
            "WEBHOOK_ALLOWED_PORTS": "9000, 10000-10099",
            "WEBHOOK_TEST_RATE_LIMIT": "3/minute",
        }
    )
    assert (settings.webhook_endpoint_in_flight, settings.webhook_employer_in_flight) == (3, 12)
    assert settings.webhook_allowed_ports == ((9000, 9000), (10000, 10099))
    assert settings.webhook_test_rate_limit == "3/minute"
    default = Settings.from_env({})
    assert (default.webhook_endpoint_in_flight, default.webhook_employer_in_flight) == (2, 8)
    assert (default.webhook_allowed_ports, default.webhook_test_rate_limit) == ((), "10/minute")
    for name, value, why in (
        ("WEBHOOK_ALLOWED_PORTS", "22-", "is not a port or a range"),
        ("WEBHOOK_ALLOWED_PORTS", "9000-8000", "goes from low to high"),
        ("WEBHOOK_ALLOWED_PORTS", "70000", "is not a port or a range"),
        ("WEBHOOK_ENDPOINT_IN_FLIGHT", "0", "at least 1"),
        ("WEBHOOK_TEST_RATE_LIMIT", "often", "N/second, N/minute, N/hour or off"),
    ):
        with pytest.raises(ValueError, match=f"^{name}=.*{why}"):
            Settings.from_env({name: value})


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


def test_report_and_privacy_settings_default_and_are_read() -> None:
    """C13, C14: no reports email, 2 days, and the operator with MAIL_FROM by default."""
    default = Settings.from_env({})
    assert (default.reports_email, default.report_review_days) == (None, 2)
    assert default.privacy_contact is None
    settings = Settings.from_env(
        {
            "REPORTS_EMAIL": " trust@example.com ",
            "REPORT_REVIEW_DAYS": "5",
            "PRIVACY_CONTACT": " Zoé Tremblay, privacy@example.com ",
        }
    )
    assert settings.reports_email == "trust@example.com"
    assert settings.report_review_days == 5
    assert settings.privacy_contact == "Zoé Tremblay, privacy@example.com"
    with pytest.raises(ValueError, match=r"^PRIVACY_CONTACT=.*: must be one line"):
        Settings.from_env({"PRIVACY_CONTACT": "Ada\nLovelace"})


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


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        *[(word, True) for word in ("true", "1", "yes", "on", "TRUE", " Yes ", "On")],
        *[(word, False) for word in ("false", "0", "no", "off", "False", " NO ", "OFF")],
        ("", False),  # unset or empty: the default
    ],
)
def test_a_boolean_setting_takes_exactly_the_eight_words(raw: str, value: bool) -> None:
    assert Settings.from_env({"SMTP_STARTTLS": raw}).smtp_starttls is value


@pytest.mark.parametrize("raw", ["ture", "y", "n", "enabled", "2", "-1", "true false", "t"])
def test_a_boolean_setting_refuses_anything_else(raw: str) -> None:
    """`SMTP_STARTTLS=ture` was off, and the password went to the relay in clear text."""
    with pytest.raises(ValueError) as refused:
        Settings.from_env({"SMTP_STARTTLS": raw})
    assert str(refused.value) == (
        f"SMTP_STARTTLS={raw!r}: not true or false (true/false, 1/0, yes/no, on/off)"
    )


@pytest.mark.parametrize(
    "raw",
    [
        "jobpost@localhost",  # C9's default: a relay on this machine
        "jobs@example.com",
        "Jobs <jobs@example.com>",
        '"Maple Jobs, Inc." <jobs@maple.test>',
        "Emplois Érable <emplois@érable.ca>",
    ],
)
def test_mail_from_takes_one_address_bare_or_with_a_name(raw: str) -> None:
    assert Settings.from_env({"MAIL_FROM": raw}).mail_from == raw


@pytest.mark.parametrize(
    "raw",
    [
        "jobs",
        "jobs@",
        "@example.com",
        "jobs@example",  # no dot: C4's rules
        "jobs@local",
        "jobs@example.com, other@example.com",
        "Jobs <jobs@exa mple.com>",
        "jobs@@example.com",
        "jobs@example.com\r\nBcc: all@example.com",
        "Jobs <=?utf-8?q?x?=@example.com>",
    ],
)
def test_mail_from_that_is_not_one_valid_address_stops_the_process(raw: str) -> None:
    """Checked at start, by C4's address rules (models.core.checks.email): a sender the relay
    refuses would fail every copy, one at a time, long after the start."""
    with pytest.raises(ValueError, match=rf"^MAIL_FROM={re.escape(repr(raw))}: not "):
        Settings.from_env({"MAIL_FROM": raw})


SECRETS = {
    "DATABASE_URL": "postgresql://jobpost:Db-S3cret@db.internal:5432/jobpost",
    "CELERY_BROKER_URL": "redis://:Broker-S3cret@redis.internal:6379/0",
    "REDIS_URL": "rediss://limiter:Redis-S3cret@cache.internal:6380/1?password=Redis-S3cret",
    "SMTP_USER": "jobpost",
    "SMTP_PASSWORD": "Smtp-S3cret",
}


def test_no_password_appears_in_the_settings_repr() -> None:
    settings = Settings.from_env(SECRETS)
    assert settings.smtp_password == "Smtp-S3cret"  # still there to be used
    for shown in (repr(settings), str(settings), f"{settings}", f"{[settings]}"):
        assert "S3cret" not in shown, shown
    shown = repr(settings)
    assert "database_url='postgresql+psycopg://jobpost:***@db.internal:5432/jobpost'" in shown
    assert "broker_url='redis://:***@redis.internal:6379/0'" in shown
    assert "redis_url='rediss://limiter:***@cache.internal:6380/1?password=***'" in shown
    assert "smtp_password='***'" in shown and "smtp_user='jobpost'" in shown
    assert "smtp_password=None" in repr(Settings.from_env({}))


def test_no_password_appears_in_the_relay_settings_repr() -> None:
    """The delivery task hands the relay its own settings object, which a log line or a
    traceback's locals may show too."""
    from workers.delivery import smtp_settings

    shown = repr(smtp_settings(Settings.from_env(SECRETS)))
    assert "S3cret" not in shown and "jobpost" in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqla+sqlite:///var/broker.sqlite", "sqla+sqlite:///var/broker.sqlite"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
        ("redis://user@redis:6379/0", "redis://user@redis:6379/0"),
        ("redis://:p%40ss@redis:6379/0", "redis://:***@redis:6379/0"),
        ("postgresql://u:Xy7@secret@db/j", "postgresql://u:***@db/j"),  # an '@' not encoded
        ("unix://:secret@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
        ("postgresql://u@db/j?password=secret&x=1", "postgresql://u@db/j?password=***&x=1"),
    ],
)
def test_hide_password(url: str, shown: str) -> None:
    assert hide_password(url) == shown


def test_a_log_line_with_the_settings_shows_no_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="jobpost.test")
    logging.getLogger("jobpost.test").info("settings: %s", Settings.from_env(SECRETS))
    [record] = caplog.records
    assert "S3cret" not in logs.JsonFormatter().format(record)


def test_a_mistyped_boolean_stops_a_command_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("SMTP_STARTTLS", "ture")
    assert main(["employers", "list"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        "jobpost: SMTP_STARTTLS='ture': not true or false (true/false, 1/0, yes/no, on/off)\n"
    )


def test_the_change_feed_lag_is_5_seconds_unless_set() -> None:
    """C14: CHANGE_FEED_LAG_SECONDS, default 5; fractions allowed."""
    assert Settings.from_env({}).change_feed_lag_seconds == 5
    assert Settings.from_env({"CHANGE_FEED_LAG_SECONDS": "2.5"}).change_feed_lag_seconds == 2.5


# --- secrets from files (NAME_FILE) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("JOBPOST_SECRET_KEY", "x" * 43 + "=", "secret_key"),
        ("SMTP_PASSWORD", "Smtp-S3cret", "smtp_password"),
        ("DATABASE_URL", "postgresql://jobpost:Db-S3cret@db/jobpost", "database_url"),
        ("CELERY_BROKER_URL", "redis://:Broker-S3cret@redis:6379/0", "broker_url"),
        ("REDIS_URL", "redis://:Redis-S3cret@redis:6379/1", "redis_url"),
    ],
)
def test_a_secret_is_read_from_the_file_its_file_variable_names(
    tmp_path: Path, name: str, value: str, field: str
) -> None:
    """A Docker secret (`/run/secrets/…`) ends with a newline: it is not part of the value."""
    secret = tmp_path / "secret"
    secret.write_text(value + "\n", encoding="utf-8")
    from_file = Settings.from_env({f"{name}_FILE": str(secret)})
    assert from_file == Settings.from_env({name: value})
    assert getattr(from_file, field) is not None and "S3cret" not in repr(from_file)


def test_a_secret_given_both_ways_is_refused_naming_both(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-the-file", encoding="utf-8")
    env = {"SMTP_PASSWORD": "in-the-env", "SMTP_PASSWORD_FILE": str(secret)}
    with pytest.raises(ValueError, match=r"^SMTP_PASSWORD and SMTP_PASSWORD_FILE are both set"):
        Settings.from_env(env)


@pytest.mark.parametrize("kind", ["missing", "directory", "empty"])
def test_a_secret_file_that_cannot_be_read_is_refused_naming_the_variable(
    tmp_path: Path, kind: str
) -> None:
    path = {"missing": tmp_path / "nowhere", "directory": tmp_path}.get(kind, tmp_path / "key")
    if kind == "empty":
        path.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^JOBPOST_SECRET_KEY_FILE: ") as refused:
        Settings.from_env({"JOBPOST_SECRET_KEY_FILE": str(path)})
    assert str(path) in str(refused.value)


def test_a_secret_file_whose_value_is_refused_names_the_variable_not_the_value(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "url"
    secret.write_text("postgresql+psycopg2://jobpost:Db-S3cret@db/jobpost\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^DATABASE_URL: ") as refused:
        Settings.from_env({"DATABASE_URL_FILE": str(secret)})
    assert "S3cret" not in str(refused.value)


def test_a_command_reads_its_secret_key_from_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The whole path, as `jobpost` runs it: a file that cannot be read stops the command in
    one line naming the variable."""
    monkeypatch.setenv("JOBPOST_SECRET_KEY_FILE", str(tmp_path / "absent.key"))
    assert main(["employers", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jobpost: JOBPOST_SECRET_KEY_FILE: cannot read ") and err.count("\n") == 1


def printed_command(message: str) -> str:
    """The command a message asks the operator to run: the last text in backquotes."""
    found = re.findall(r"`([^`]+)`", message)
    assert found, f"no command in {message!r}"
    return str(found[-1])


def run_as_an_operator(command: str) -> str:
    """`command` through a shell, with this install's programs first on PATH, as an operator
    in the image (or in an activated virtualenv) would type it."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        ["sh", "-c", command],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_key_a_refused_secret_key_asks_for_is_accepted() -> None:
    """The message said to print Fernet.generate_key(): its `b'…'` is refused in turn."""
    with pytest.raises(ValueError, match=r"^JOBPOST_SECRET_KEY: not a Fernet key") as refused:
        Settings.from_env({"JOBPOST_SECRET_KEY": "typo"})
    key = run_as_an_operator(printed_command(str(refused.value))).strip()
    assert Settings.from_env({"JOBPOST_SECRET_KEY": key}).secret_key == key


def test_the_key_a_missing_secret_key_asks_for_is_accepted(tmp_path: Path) -> None:
    from models.webhooks import secrets

    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    with pytest.raises(secrets.MissingKey, match="JOBPOST_SECRET_KEY_FILE") as missing:
        secrets.load_key(settings)
    key = run_as_an_operator(printed_command(str(missing.value)))
    key_file = tmp_path / "jobpost.key"
    key_file.write_text(key, encoding="utf-8")  # as `… > jobpost.key` writes it
    given = Settings.from_env({"JOBPOST_SECRET_KEY_FILE": str(key_file)})
    assert secrets.load_key(given) == key.strip().encode()
