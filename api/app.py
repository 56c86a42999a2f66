"""The WSGI application, assembled in one factory from its collaborators."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import falcon
from sqlalchemy.orm import Session, sessionmaker

from api import errors, jobs, reference
from api.middleware import Cors, MethodOverride, RequestId, SessionManager
from api.openapi_resource import OpenApi
from models.dates import today_in
from models.db import make_engine, make_sessionmaker
from models.settings import Settings

WsgiApp = falcon.App[falcon.Request, falcon.Response]

API = "/api/v1.1"


def create_app(settings: Settings, sessions: sessionmaker[Session], *,
               today: Callable[[], date] | None = None) -> WsgiApp:  # fmt: skip
    """Build the app; `today` gives the service date (C5), tests pass their own clock."""
    clock = today or (lambda: today_in(settings.timezone))
    middleware: list[Any] = [RequestId(), MethodOverride(), Cors(), SessionManager(sessions)]
    app = falcon.App(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    errors.register(app)
    base = settings.public_base_url
    app.add_route(f"{API}/jobs", jobs.JobCollection(clock, base))
    app.add_route(f"{API}/jobs/{{job_id}}", jobs.JobItem(clock, base))
    app.add_route(f"{API}/positiontypes", reference.PositionTypes())
    app.add_route(f"{API}/categories", reference.Categories())
    app.add_route(f"{API}/locations", reference.Locations(base))
    app.add_route(f"{API}/locations/{{location_id}}", reference.LocationItem())
    app.add_route(f"{API}/openapi.json", OpenApi())
    return app


def get_app() -> WsgiApp:
    """For gunicorn (`api.app:get_app()`): everything from the environment (C9)."""
    settings = Settings.from_env()
    return create_app(settings, make_sessionmaker(make_engine(settings.database_url)))
