"""The planner of a sync run (workers.syncing `_Planner`, C11): on PostgreSQL a thread with a
connection of its own reads and checks the next batch while the run's session writes this
one. On a committed database of its own (the planner needs an engine's connections, not a
test's one shared connection): runs of many batches come out as the one-session path makes
them, a referenceId another writer creates after its batch was checked is updated, not
created twice, a planner that fails hands its batch back, and a run that stops lets go of
the planner's thread and connection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from models import employers
from models.core.settings import Settings
from models.db.entities import Job
from models.db.unit_of_work import make_sessionmaker
from models.syncs import batches as sync_batches
from tests.conftest import Api, migrated
from tests.factories import job_body
from workers import syncing

SYNCS = "/api/v1.1/syncs"
JOBS = "/api/v1.1/jobs"


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with migrated("postgresql", tmp_path_factory.mktemp("planner")) as engine:
        yield engine


class World:
    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        self.engine = engine
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self.settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
        self.api = Api(create_app(self.settings, self.sessions))
        with self.sessions() as s:
            employer = employers.create_employer(s, f"Planner {tmp_path.name}")
            self.employer_id = employer.id
            self.key = employers.issue_key(s, employer.id).key
            s.commit()

    def start(self, items: list[dict[str, Any]]) -> int:
        started = self.api.post(SYNCS, json={"mode": "upsert", "jobs": items}, key=self.key)
        assert started.status_code == 202, started.text
        run_id: int = started.json["id"]
        return run_id

    def process(self, run_id: int) -> str:
        return syncing.process(
            self.sessions, run_id, lease_seconds=300, timezone=self.settings.timezone
        )

    def items(self, run_id: int) -> list[tuple[str, str, list[str]]]:
        found = self.api.get(f"{SYNCS}/{run_id}/items?pageSize=100", key=self.key).json["data"]
        return [(i["referenceId"], i["outcome"], [e["code"] for e in i["errors"]]) for i in found]

    def versions(self) -> dict[str, int]:
        with self.sessions() as s:
            rows = s.execute(
                select(Job.reference_id, Job.version).where(Job.employer_id == self.employer_id)
            )
            return {str(ref): version for ref, version in rows}


@pytest.fixture
def world(committed: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setattr(syncing, "BATCH", 3)  # a run of a few items spans batches
    return World(committed, tmp_path)


def item(ref: str, **overrides: Any) -> dict[str, Any]:
    return {**job_body(**overrides), "referenceId": ref}


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The referenceIds of each batch the planner's thread prepared."""
    seen: list[list[str]] = []
    real = sync_batches.prepare

    def spy(session: Any, employer: Any, batch: Any, **kw: Any) -> Any:
        if threading.current_thread().name.startswith("sync-planner"):
            seen.append([p.reference_id for p in batch])
        return real(session, employer, batch, **kw)

    monkeypatch.setattr(sync_batches, "prepare", spy)
    return seen


def test_a_run_of_many_batches_comes_out_as_one_session_makes_it(
    world: World, planned: list[list[str]]
) -> None:
    assert world.api.put(JOBS, json=item("OLD"), key=world.key).status_code == 201
    first = world.start([item(f"R{i}") for i in range(4)])
    assert world.process(first) == "completed"
    items = [
        item("R0"),  # resent unchanged
        item("R1", title="Head Baker"),  # changed
        item("NEW1"),
        {"referenceId": "BAD", "title": ""},  # fails: a create without its required members
        {"referenceId": "OLD", "title": "Old, renamed"},  # a job another write made
        item("NEW2"),
        item("R2"),
        {"referenceId": "R3", "salary": "lots"},  # fails: an update breaking a rule
    ]
    run_id = world.start(items)
    planned.clear()
    assert world.process(run_id) == "completed"
    assert planned == [["BAD", "OLD", "NEW2"], ["R2", "R3"]]  # all but the first batch
    found = world.items(run_id)
    assert [(ref, outcome) for ref, outcome, _errors in found] == [
        ("R0", "unchanged"),
        ("R1", "updated"),
        ("NEW1", "created"),
        ("BAD", "failed"),
        ("OLD", "updated"),
        ("NEW2", "created"),
        ("R2", "unchanged"),
        ("R3", "failed"),
    ]
    assert "required" in found[3][2] and found[7][2]  # each says why
    assert world.versions() == {
        "OLD": 2,
        "R0": 1,
        "R1": 2,
        "R2": 1,
        "R3": 1,
        "NEW1": 1,
        "NEW2": 1,
    }


def test_a_referenceid_created_after_its_batch_was_checked_is_updated_not_created_twice(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sync_batches.prepare

    def then_created(session: Any, employer: Any, batch: Any, **kw: Any) -> Any:
        prepared = real(session, employer, batch, **kw)
        if "LATE" in [p.reference_id for p in batch]:  # checked as a create; then a PUT
            made = world.api.put(JOBS, json=item("LATE", title="Theirs"), key=world.key)
            assert made.status_code == 201, made.text
        return prepared

    monkeypatch.setattr(sync_batches, "prepare", then_created)
    run_id = world.start([item("A"), item("B"), item("C"), item("LATE"), item("D")])
    assert world.process(run_id) == "completed"
    assert [(ref, outcome) for ref, outcome, _e in world.items(run_id)] == [
        ("A", "created"),
        ("B", "created"),
        ("C", "created"),
        ("LATE", "updated"),
        ("D", "created"),
    ]
    assert world.versions()["LATE"] == 2  # the PUT's job, updated by the item
    with world.sessions() as s:
        title = s.scalar(select(Job.title).where(Job.reference_id == "LATE"))
    assert title == "Senior Baker"


def test_a_planner_that_fails_hands_its_batch_back_to_the_run_session(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = sync_batches.prepare

    def failing(session: Any, employer: Any, batch: Any, **kw: Any) -> Any:
        if threading.current_thread().name.startswith("sync-planner"):
            raise RuntimeError("the planner's connection went away")
        return real(session, employer, batch, **kw)

    monkeypatch.setattr(sync_batches, "prepare", failing)
    run_id = world.start([item(f"F{i}") for i in range(7)])
    assert world.process(run_id) == "completed"
    assert [o for _r, o, _e in world.items(run_id)] == ["created"] * 7
    assert "planning a batch failed" in caplog.text
    assert "a batch failed" not in caplog.text.replace("planning a batch failed", "")


def test_a_run_cancelled_midway_stops_and_lets_go_of_the_planner(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    real: Callable[..., Any] = sync_batches.apply_prepared
    run_id = world.start([item(f"C{i}") for i in range(9)])

    def cancel_after_the_first(
        session: Any, run: Any, employer: Any, prepared: Any, **kw: Any
    ) -> Any:
        if prepared.items[0].pending.reference_id == "C3":
            cancelled = world.api.post(f"{SYNCS}/{run_id}/cancel", key=world.key)
            assert cancelled.status_code == 200, cancelled.text
        return real(session, run, employer, prepared, **kw)

    monkeypatch.setattr(sync_batches, "apply_prepared", cancel_after_the_first)
    assert world.process(run_id) == "lost"
    assert sorted(world.versions()) == ["C0", "C1", "C2"]  # the batch cancelled, rolled back
    assert not [t for t in threading.enumerate() if t.name.startswith("sync-planner")]
    assert world.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
