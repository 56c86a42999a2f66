"""The data of the events models emits in a write's own transaction (C12), which is an answer's
shape: a job event's is the job list element, `sync.completed`'s the sync run resource.

Those shapes are defined once, in api/, which models may not import; so each process's entry
point (api.app.create_app, workers.app.make_celery, the `jobpost` command, the tests) installs
api.representations.PAYLOADS here, and the emitters ask for it when they render an event."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: models.jobs imports this module
    from sqlalchemy import Row

    from models.db.entities import AddressFlag, Application, Job
    from models.employers import Access
    from models.jobs.listing import Header
    from models.jobs.rows import StoredJob
    from models.jobs.tombstones import Deleted


class Payloads(Protocol):
    """What an event's data is made of; api.representations implements it."""

    def job_event(
        self, job: Header, employer: Access, close_date: date | None
    ) -> dict[str, Any]: ...

    def sync_run(self, run: Row[Any]) -> dict[str, Any]: ...

    def application(self, a: Application) -> dict[str, Any]: ...

    def address_flagged(self, flag: AddressFlag, jobs: list[Job]) -> dict[str, Any]: ...

    def changes(
        self, stored: StoredJob | None, written: StoredJob, employer_name: str
    ) -> list[dict[str, Any]]: ...

    def change(self, item: Header | Deleted, employer: Access) -> dict[str, Any]: ...


_installed: list[Payloads] = []


def install(payloads: Payloads) -> None:
    """Make `payloads` the process's renderers; installing again replaces them."""
    _installed[:] = [payloads]


def installed() -> Payloads:
    """The process's renderers; none installed is a wiring mistake, said in one line rather
    than an event written with the wrong data."""
    if not _installed:
        raise RuntimeError(
            "no webhook payloads installed: the process's entry point calls "
            "models.webhooks.payloads.install(api.representations.PAYLOADS)"
        )
    return _installed[0]
