"""What every `jobpost` command is handed, and how it prints."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.unit_of_work import make_sessionmaker

if TYPE_CHECKING:  # imported by the commands that send tasks, as workers.app makes the app
    from celery import Celery


class Command:
    """The settings, read once by `main`, and what a command makes of them, each at most once
    and only if the command uses it: one engine and its sessionmaker, one Celery app to send
    tasks with. `main` closes them when the command is done."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @cached_property
    def engine(self) -> Engine:
        return make_engine(self.settings.database_url)

    @cached_property
    def sessions(self) -> sessionmaker[Session]:
        return make_sessionmaker(self.engine, self.settings.change_feed_lag_seconds)

    @cached_property
    def celery(self) -> Celery:
        from workers.app import make_celery

        return make_celery(self.settings)

    def close(self) -> None:
        if "engine" in self.__dict__:
            self.engine.dispose()
        if "celery" in self.__dict__:
            self.celery.close()


Handler = Callable[[argparse.Namespace, Command], int]


def out(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    """One JSON object on one line with --json, else the human text."""
    print(orjson.dumps(data).decode() if getattr(args, "json", False) else text)


def json_flag(c: argparse.ArgumentParser) -> None:
    """--json, before or after a subcommand (`outbox --json retry`, `outbox retry --json`):
    argparse writes a subcommand's defaults over what its parent parsed, so the flag has no
    default and sets `json` only when given; `out` takes it as absent otherwise."""
    c.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON object"
    )
