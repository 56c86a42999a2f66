"""`jobpost syncs` (C11, C14), in-process on a committed copy of the migrated SQLite database:
the list (by status and employer), one run, cancelling one; `--json` prints the API's shapes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.dates import utcnow
from models.db.entities import SyncRun
from models.db.unit_of_work import session_scope
from models.syncs import requests as sync_requests
from models.syncs import runs as syncs
from workers.cli import main

pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


def a_run(sessions: sessionmaker[Session], name: str, *, open_run: bool = False) -> int:
    with session_scope(sessions) as s:
        employer = employers.create_employer(s, name)
        request = sync_requests.SyncRequest(
            "upsert", open_run, False, False, [("R-1", '{"referenceId":"R-1"}')]
        )
        run_id: int = syncs.start(s, employer, request, now=utcnow()).id
        return run_id


def printed(capsys: Any) -> Any:
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1
    return orjson.loads(out)


def test_the_list_prints_the_runs_newest_first_filtered(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    first = a_run(copy, "One")
    second = a_run(copy, "Two", open_run=True)
    assert main(["syncs", "--json"]) == 0
    data = printed(capsys)["data"]
    assert [r["id"] for r in data] == [second, first]
    assert set(data[0]) == {
        "id", "mode", "dryRun", "status", "total", "processed", "created", "updated",
        "unchanged", "archived", "failed", "createdAt", "startedAt", "finishedAt",
    }  # fmt: skip
    assert main(["syncs", "--status", "open", "--json"]) == 0
    assert [r["id"] for r in printed(capsys)["data"]] == [second]
    with copy() as s:
        employer_id = s.get_one(SyncRun, first).employer_id
    assert main(["syncs", "--employer", str(employer_id), "--json"]) == 0
    assert [r["id"] for r in printed(capsys)["data"]] == [first]
    assert main(["syncs"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert len(text) == 3 and text[1].split()[0] == str(second)


def test_show_and_cancel_print_the_run(copy: sessionmaker[Session], capsys: Any) -> None:
    run_id = a_run(copy, "One")
    assert main(["syncs", "show", str(run_id), "--json"]) == 0
    assert printed(capsys)["status"] == "queued"
    assert main(["syncs", "cancel", str(run_id), "--json"]) == 0
    cancelled = printed(capsys)
    assert cancelled["status"] == "cancelled" and cancelled["finishedAt"].endswith("Z")
    assert main(["syncs", "cancel", str(run_id)]) == 1  # finished: sync_not_open
    assert "can no longer be cancelled" in capsys.readouterr().err
    assert main(["syncs", "show", "999"]) == 1
    with pytest.raises(SystemExit) as usage:
        main(["syncs", "--status", "done"])
    assert usage.value.code == 2
