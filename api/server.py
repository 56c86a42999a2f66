"""`jobpost serve`: the WSGI app under gunicorn, one app (and engine) per worker process."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication


class Server(BaseApplication):  # type: ignore[misc]  # gunicorn ships no type hints
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from api.app import get_app

        return get_app()


def serve(host: str, port: int, workers: int, **extra: Any) -> None:
    options = {"bind": f"{host}:{port}", "workers": workers, "accesslog": None,
               "worker_class": "sync", "timeout": 30, **extra}  # fmt: skip
    Server(options).run()
