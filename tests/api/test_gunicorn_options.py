"""`jobpost serve` reads GUNICORN_CMD_ARGS as gunicorn does (C9): its options override
jobpost's own choices; --host, --port and --workers, when given, override it. What gunicorn
would refuse stops the command in one line, before anything starts."""

from __future__ import annotations

import os
from typing import Any

import pytest

import api.server
from api.server import Server, options_for
from workers.cli import main

OWN = ("--timeout", "45", "--keep-alive", "7", "--bind", "0.0.0.0:9000", "--workers", "3")


def test_jobpost_serve_alone_keeps_its_own_choices() -> None:
    options = options_for(None, None, None)
    assert options["bind"] == "127.0.0.1:8000"
    assert options["timeout"] == 30
    assert options["worker_class"] == "api.gunicorn_workers.ProblemSyncWorker"


def test_gunicorn_cmd_args_override_jobposts_choices() -> None:
    server = Server(options_for(None, None, None, cmd_args=OWN))  # configured, not run
    assert server.cfg.timeout == 45
    assert server.cfg.keepalive == 7
    assert server.cfg.bind == ["0.0.0.0:9000"]
    assert server.cfg.workers == 3
    assert server.cfg.worker_class_str == "api.gunicorn_workers.ProblemSyncWorker"  # kept


def test_the_options_of_jobpost_serve_given_override_gunicorn_cmd_args() -> None:
    options = options_for("127.0.0.1", 8123, 2, cmd_args=OWN)
    assert (options["bind"], options["workers"], options["timeout"]) == ("127.0.0.1:8123", 2, 45)
    assert options_for(None, 8124, None, cmd_args=OWN)["bind"] == "127.0.0.1:8124"


def never(*args: object, **kwargs: object) -> None:
    raise AssertionError("gunicorn started")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("--no-such-option", "GUNICORN_CMD_ARGS: unrecognized arguments: --no-such-option"),
        ("--workers many", "GUNICORN_CMD_ARGS: argument -w/--workers: invalid int value: 'many'"),
        ("--config gunicorn.conf.py", "GUNICORN_CMD_ARGS: a configuration file (--config) is not"),
        ("myapp:app", "GUNICORN_CMD_ARGS: no application may be named (myapp:app)"),
        ("--help", "GUNICORN_CMD_ARGS: --help and --version are for the gunicorn command"),
        ('--timeout "60', "GUNICORN_CMD_ARGS='--timeout \"60': cannot be split"),
    ],
)
def test_what_gunicorn_would_refuse_stops_jobpost_serve_in_one_line(
    value: str, why: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(api.server.Server, "run", never)
    monkeypatch.setenv("GUNICORN_CMD_ARGS", value)
    assert main(["serve"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.startswith(f"jobpost: {why}")
    assert printed.err.count("\n") == 1


@pytest.mark.parametrize(
    ("bind", "url"),
    [
        ("127.0.0.1:8123", "http://127.0.0.1:8123"),
        (["jobs.internal:9000", "127.0.0.1:9001"], "http://jobs.internal:9000"),
        ("0.0.0.0:8000", "http://127.0.0.1:8000"),
        ("[::]:8000", "http://[::1]:8000"),
        ("unix:/run/jobpost.sock", None),
    ],
)
def test_the_base_of_absolute_urls_without_public_base_url_is_the_listen_address(
    bind: str | list[str], url: str | None
) -> None:
    """C9: never the request's Host; a wildcard is named by its loopback address."""
    assert api.server.listen_url(bind) == url


def test_a_socket_file_without_public_base_url_stops_jobpost_serve_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(api.server.Server, "run", never)
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--bind unix:/tmp/jobpost-test.sock")
    monkeypatch.delenv("PUBLIC_BASE_URL", raising=False)
    assert main(["serve"]) == 1
    assert capsys.readouterr().err.startswith("jobpost: PUBLIC_BASE_URL must be set")
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://jobs.example.test")
    monkeypatch.setattr(api.server.Server, "run", lambda self: None)
    assert main(["serve"]) == 0


def test_jobpost_dev_gives_its_processes_its_own_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker does not know where the web listens: `jobpost dev` tells it (the report
    email's link), unless PUBLIC_BASE_URL is set already."""
    from workers.dev import tell_children

    monkeypatch.delenv("PUBLIC_BASE_URL", raising=False)  # restored after the test
    assert tell_children("0.0.0.0", 8765, None) == "http://127.0.0.1:8765"
    public = "https://jobs.example.test"
    assert tell_children("127.0.0.1", 8765, public) == public
    assert os.environ["PUBLIC_BASE_URL"] == public
