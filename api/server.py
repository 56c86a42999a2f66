"""`jobpost serve`: the WSGI app under gunicorn, one app (and engine) per worker process.

The workers share their metrics through files in PROMETHEUS_MULTIPROC_DIR (C9). The variable
is set here, in the master, before anything imports prometheus_client and before the workers
fork, and the directory is emptied at start: files of an earlier run would be summed in.
Nothing in this module may import prometheus_client at import time.

GUNICORN_CMD_ARGS is read as gunicorn reads it: its options override jobpost's own choices
(below), and `jobpost serve`'s --host, --port and --workers, when given, override it.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gunicorn.app.base import BaseApplication
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.util import parse_address


class Server(BaseApplication):  # type: ignore[misc]  # gunicorn ships no type hints
    def __init__(self, options: dict[str, Any], *, listen_url: str | None = None) -> None:
        self.options, self.listen_url = options, listen_url
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from api.app import get_app

        return get_app(self.listen_url)


class NoAccessLog(Logger):  # type: ignore[misc]
    """gunicorn's logger without its access log: ours is api.observability's, and gunicorn's
    would format every request's fields for no handler (its cost: docs/benchmarks.md)."""

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        return None


def prepare_metrics_dir(path: str | Path) -> str:
    """Create `path` (absolute), remove the metric files of an earlier run, and make this
    process and its children use it (PROMETHEUS_MULTIPROC_DIR). Subdirectories (a worker's
    own, say) are left alone."""
    folder = Path(path).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    return str(folder)


def child_exit(folder: str) -> Callable[[Any, Any], None]:
    """A gunicorn hook for the master: a worker is gone; its live gauges go with it, and its
    counts are added to those of the workers gone before, in `folder` (`fold_dead`)."""

    def gone(server: Any, worker: Any) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, folder)  # type: ignore[no-untyped-call]
        fold_dead(folder, worker.pid)

    return gone


# The kinds of metric files whose values add up across processes (a gauge's do not).
ADDITIVE = ("counter", "histogram", "summary")


def fold_dead(folder: str | Path, pid: int) -> None:
    """Add the counts of a dead process into one file per kind (`counter_gone.db`), and
    remove its own. Each worker counts into files of its pid, kept after it exits so that no
    count goes down; every scrape reads them all, so a dead worker's are folded (what they
    cost unfolded: docs/benchmarks.md). The sum is written beside and renamed into place, so
    a scrape reads the old sum or the new one, never half."""
    from prometheus_client.mmap_dict import MmapedDict

    for kind in ADDITIVE:
        dead = Path(folder) / f"{kind}_{pid}.db"
        if not dead.exists():
            continue
        gone = Path(folder) / f"{kind}_gone.db"
        staged = Path(folder) / f"{kind}_gone.staged"  # not *.db: no scrape reads it
        if gone.exists():
            shutil.copyfile(gone, staged)
        else:
            staged.unlink(missing_ok=True)
        merged = MmapedDict(str(staged))  # type: ignore[no-untyped-call]
        counted = MmapedDict.read_all_values_from_file(str(dead))  # type: ignore[no-untyped-call]
        try:
            for key, value, timestamp, _ in counted:
                total = merged.read_value(key)[0] + value  # type: ignore[no-untyped-call]
                merged.write_value(key, total, timestamp)  # type: ignore[no-untyped-call]
        finally:
            merged.close()  # type: ignore[no-untyped-call]
        os.replace(staged, gone)
        dead.unlink()


# gunicorn's own lines (start, worker boot and timeout) as JSON on stderr too (C9); the
# access log is ours (api.observability), gunicorn's stays off.
LOGGING = {
    "root": {"level": "INFO", "handlers": ["json"]},
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
        "gunicorn.access": {"level": "INFO", "handlers": [], "propagate": False},
    },
    "handlers": {
        "json": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stderr",
        },
    },
    "formatters": {"json": {"()": "models.core.logs.JsonFormatter"}},
}


DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
DEFAULT_LISTEN_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
# A wildcard address is reached on this machine through its loopback address.
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def serve(
    host: str | None,
    port: int | None,
    workers: int | None,
    *,
    metrics_dir: str | None = None,
    cmd_args: Sequence[str] = (),
    public_base_url: str | None = None,
    **extra: Any,
) -> None:
    """gunicorn, on `options_for`'s options (`host`, `port`, `workers`: None when not given).
    A value of GUNICORN_CMD_ARGS (`cmd_args`) gunicorn refuses is a ValueError, before
    anything starts; so is a socket file to listen on without `public_base_url`."""
    options = options_for(host, port, workers, cmd_args=cmd_args)
    listening = listen_url(options["bind"], tls=bool(options.get("certfile")))
    if listening is None and public_base_url is None:
        raise ValueError(
            "PUBLIC_BASE_URL must be set when jobpost serve listens on a socket file or "
            "descriptor: the service's absolute URLs need an http address (C9)"
        )
    if metrics_dir is not None:
        options["child_exit"] = child_exit(prepare_metrics_dir(metrics_dir))
    Server({**options, **extra}, listen_url=listening).run()


def listen_url(bind: str | Sequence[str], *, tls: bool = False) -> str | None:
    """The origin of the first address gunicorn listens on (`bind`): the base of the service's
    absolute URLs when PUBLIC_BASE_URL is unset, never the request's Host (C9). A wildcard
    host is named by its loopback address; a socket file or descriptor has none (None)."""
    first = bind if isinstance(bind, str) else bind[0]
    address = parse_address(first, DEFAULT_PORT)
    if not isinstance(address, tuple):
        return None
    host, port = str(address[0]), address[1]
    host = _WILDCARDS.get(host, host)
    return f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}"


def options_for(
    host: str | None, port: int | None, workers: int | None, *, cmd_args: Sequence[str] = ()
) -> dict[str, Any]:
    """gunicorn's options for `jobpost serve`: jobpost's, then GUNICORN_CMD_ARGS', then the
    command's own."""
    options: dict[str, Any] = {
        "bind": f"{DEFAULT_HOST}:{DEFAULT_PORT}",
        "workers": os.cpu_count() or 1,
        "accesslog": None,
        "logger_class": NoAccessLog,
        "worker_class": "api.gunicorn_workers.ProblemSyncWorker",
        "timeout": 30,
        "logconfig_dict": LOGGING,
        # gunicorn 25.1+ opens a control socket at one path per user ($XDG_RUNTIME_DIR or
        # ~/.gunicorn): a second server on the machine takes it from the first, and nothing
        # of ours uses it. A supervisor's signals (TERM, HUP, TTIN) still reach the master.
        "control_socket_disable": True,
    }
    options.update(gunicorn_cmd_args(cmd_args))
    if host is not None or port is not None:
        options["bind"] = f"{host or DEFAULT_HOST}:{port or DEFAULT_PORT}"
    if workers is not None:
        options["workers"] = workers
    return options


NOT_READ = {"config": "a configuration file (--config) is not read by `jobpost serve`"}


def gunicorn_cmd_args(words: Sequence[str]) -> dict[str, Any]:
    """GUNICORN_CMD_ARGS' options, parsed and checked by gunicorn's own parser and settings;
    one it refuses is a ValueError naming the variable."""
    config = Config()
    parser = config.parser()

    def refuse(message: str) -> NoReturn:
        raise ValueError(f"GUNICORN_CMD_ARGS: {message}")

    parser.error = refuse  # argparse would print the usage and exit 2
    with contextlib.redirect_stdout(io.StringIO()):  # --help, --version
        try:
            parsed = parser.parse_args(list(words))
        except SystemExit:
            refuse("--help and --version are for the gunicorn command")
    given = {k: v for k, v in vars(parsed).items() if v is not None and k != "args"}
    if parsed.args:
        refuse(f"no application may be named ({' '.join(parsed.args)}): jobpost serves its own")
    for name, why in NOT_READ.items():
        if name in given:
            refuse(why)
    for name, value in given.items():
        try:
            config.set(name, value)
        except (ValueError, TypeError) as e:
            refuse(f"{name}: {e}")
    return given
