"""The worker's side of sync runs (C11), in-process on SQLite and PostgreSQL: leases, a dead
worker's run resumed at its first pending item with nothing applied twice, the item that keeps
killing workers, cancel between items, handing a long run on, the sweeper and the purge. The
same code in real `celery worker` processes: tests/workers/test_sync_worker.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import Employer, Job, SyncItem, SyncRun
from models.db.unit_of_work import session_scope
from models.syncs import processing as sync_work
from models.syncs import runs as syncs
from models.webhooks import messages as webhook_messages
from tests.factories import job_body, take_down
from workers import syncing

SYNCS = "/api/v1.1/syncs"
LEASE = 300.0


def item(ref: str, **overrides: Any) -> dict[str, Any]:
    return {**job_body(**overrides), "referenceId": ref}


def new_run(api: Any, account: Any, refs: list[str], **more: Any) -> int:
    body = {"mode": "upsert", "jobs": [item(r) for r in refs], **more}
    result = api.post(SYNCS, json=body, key=account.key)
    assert result.status_code == 202, result.text
    run_id: int = result.json["id"]
    return run_id


def process(
    sessions: sessionmaker[Session], settings: Settings, run_id: int, at: datetime, **kw: Any
) -> str:
    return syncing.process(
        sessions, run_id, lease_seconds=LEASE, timezone=settings.timezone, now=lambda: at, **kw
    )


def claim(sessions: sessionmaker[Session], run_id: int, at: datetime) -> sync_work.Claimed | None:
    """A worker that claims the run and then dies: its claim committed, nothing let go."""
    with session_scope(sessions) as s:
        return sync_work.claim(s, run_id, now=at, lease_seconds=LEASE)


def outcomes(session: Session, run_id: int) -> list[tuple[str, str, int]]:
    session.expire_all()
    rows = session.execute(
        select(SyncItem.reference_id, SyncItem.outcome, SyncItem.attempts)
        .where(SyncItem.run_id == run_id)
        .order_by(SyncItem.position)
    )
    return [tuple(r) for r in rows]  # type: ignore[misc]


def run_row(session: Session, run_id: int) -> SyncRun:
    session.expire_all()
    run = session.get(SyncRun, run_id)
    assert run is not None
    return run


def jobs_named(session: Session, employer_id: int) -> dict[str, int]:
    """referenceId → version: a job applied twice would show version 2 (or two rows)."""
    rows = session.execute(
        select(Job.reference_id, Job.version).where(Job.employer_id == employer_id)
    )
    return {str(ref): version for ref, version in rows}


def test_a_dead_workers_run_resumes_at_its_first_pending_item_once_its_lease_runs_out(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    run_id = new_run(api, employer, ["A", "B", "C"])
    t0 = utcnow()
    held = claim(sessions, run_id, t0)
    assert held is not None and held.claim == 1
    with session_scope(sessions) as s:  # the dead worker applied A before it died
        employer_row = s.get_one(Employer, employer.id)
        first = sync_work.pending(s.connection(), run_id, after=0, limit=1)[0]
        lease = t0 + timedelta(seconds=LEASE)
        sync_work.apply_item(s, held, employer_row, first, today=t0.date(), lease_until=lease)
    assert process(sessions, settings, run_id, t0 + timedelta(seconds=10)) == "not_claimed"
    assert run_row(session, run_id).status == "running"
    later = t0 + timedelta(seconds=LEASE + 1)
    assert process(sessions, settings, run_id, later) == "completed"
    assert outcomes(session, run_id) == [
        ("A", "created", 0),
        ("B", "created", 1),
        ("C", "created", 0),
    ]
    assert jobs_named(session, employer.id) == {"A": 1, "B": 1, "C": 1}  # none applied twice
    run = run_row(session, run_id)
    assert (run.processed, run.created, run.failed, run.claim) == (3, 3, 0, 2)


def test_an_item_whose_processing_ended_its_worker_3_times_fails_and_the_run_goes_on(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    run_id = new_run(api, employer, ["KILLER", "B"])
    t = utcnow()
    lapse = timedelta(seconds=LEASE + 1)
    for _ in range(3):  # three workers take the run and die on its first item
        assert claim(sessions, run_id, t) is not None
        t += lapse
    assert outcomes(session, run_id)[0] == ("KILLER", "pending", 2)  # two deaths counted so far
    assert process(sessions, settings, run_id, t) == "completed"
    assert outcomes(session, run_id) == [("KILLER", "failed", 3), ("B", "created", 0)]
    page = api.get(f"{SYNCS}/{run_id}/items", key=employer.key).json["data"]
    assert page[0]["errors"][0]["code"] == "internal_error" and page[0]["jobId"] is None
    assert "KILLER" not in jobs_named(session, employer.id)
    run = run_row(session, run_id)
    assert (run.status, run.processed, run.failed, run.created) == ("completed", 2, 1, 1)


def test_a_worker_whose_lease_ran_out_can_no_longer_commit_an_item(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    run_id = new_run(api, employer, ["A"])
    t0 = utcnow()
    stale = claim(sessions, run_id, t0)
    assert stale is not None
    assert claim(sessions, run_id, t0 + timedelta(seconds=LEASE + 1)) is not None  # another took it
    with pytest.raises(sync_work.Lost), session_scope(sessions) as s:
        pending = sync_work.pending(s.connection(), run_id, after=0, limit=1)[0]
        employer_row = s.get_one(Employer, employer.id)
        sync_work.apply_item(s, stale, employer_row, pending, today=t0.date(), lease_until=t0)
    assert jobs_named(session, employer.id) == {}  # its job change rolled back with it
    assert outcomes(session, run_id) == [("A", "pending", 1)]


def test_cancel_is_honoured_between_items(
    api: Any,
    employer: Any,
    sessions: Any,
    settings: Settings,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = new_run(api, employer, ["A", "B", "C"], mode="snapshot")
    other = api.post("/api/v1.1/jobs", json=item("OLD", status="active"), key=employer.key)
    assert other.status_code == 201
    monkeypatch.setattr(syncing, "BATCH", 1)
    reads = []
    real_pending = sync_work.pending

    def pending(connection: Any, rid: int, *, after: int, limit: int) -> Any:
        reads.append(after)
        if len(reads) == 2:  # after A: the employer cancels
            with session_scope(sessions) as s:
                syncs.cancel(s, employer.id, run_id, now=utcnow())
        return real_pending(connection, rid, after=after, limit=limit)

    monkeypatch.setattr(sync_work, "pending", pending)
    assert process(sessions, settings, run_id, utcnow()) == "lost"
    assert outcomes(session, run_id) == [
        ("A", "created", 0),
        ("B", "pending", 0),
        ("C", "pending", 0),
    ]
    assert set(jobs_named(session, employer.id)) == {"A", "OLD"}
    run = run_row(session, run_id)
    assert (run.status, run.processed, run.archived) == ("cancelled", 1, 0)
    old = session.scalars(select(Job).where(Job.reference_id == "OLD")).one()
    assert old.status == "active"  # no snapshot archiving after a cancel


def test_a_run_longer_than_a_task_is_handed_to_the_next_task(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    run_id = new_run(api, employer, ["A", "B"])
    handed: list[int] = []
    t = utcnow()
    assert process(sessions, settings, run_id, t, budget_seconds=0, hand_on=handed.append) == (
        "handed_on"
    )
    assert handed == [run_id]
    run = run_row(session, run_id)
    assert (run.status, run.released, run.processed) == ("running", True, 0)
    assert process(sessions, settings, run_id, t) == "completed"  # at once, no lease to wait for
    assert outcomes(session, run_id) == [("A", "created", 0), ("B", "created", 0)]  # none blamed


def test_the_sweeper_enqueues_lost_and_lapsed_runs_and_cancels_stale_open_ones(
    api: Any, employer: Any, make_employer: Any, sessions: Any, session: Session
) -> None:
    t = utcnow()
    lost = new_run(api, employer, ["A"])
    lapsed = new_run(api, make_employer("Lapsed"), ["A"])
    fresh = new_run(api, make_employer("Fresh"), ["A"])
    stale_open = new_run(api, make_employer("Open"), ["A"], open=True)
    young_open = new_run(api, make_employer("Young"), ["A"], open=True)
    assert claim(sessions, lapsed, t) is not None
    with session_scope(sessions) as s:
        s.execute(
            update(SyncRun).where(SyncRun.id == lost).values(enqueued_at=t - timedelta(hours=1))
        )
        s.execute(update(SyncRun).where(SyncRun.id == fresh).values(enqueued_at=t))
        s.execute(
            update(SyncRun)
            .where(SyncRun.id == stale_open)
            .values(created_at=t - timedelta(hours=24, seconds=1))
        )
        s.execute(update(SyncRun).where(SyncRun.id == lapsed).values(enqueued_at=None))
    later = t + timedelta(seconds=LEASE + 1)
    with session_scope(sessions) as s:
        swept = sync_work.sweep(s, now=later - timedelta(seconds=LEASE), grace_seconds=120)
    assert swept == [lost]  # the lapsed run's lease still holds
    with session_scope(sessions) as s:
        swept = sync_work.sweep(s, now=later, grace_seconds=LEASE)
    # `lost` was enqueued by the first sweep, within the grace period; `fresh` before it.
    assert sorted(swept) == sorted([lapsed, fresh])
    assert run_row(session, stale_open).status == "cancelled"
    assert run_row(session, stale_open).finished_at is not None
    assert run_row(session, young_open).status == "open"


def test_the_purge_drops_runs_and_items_retention_days_after_they_finish(
    api: Any, employer: Any, make_employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    t = utcnow()
    old = new_run(api, employer, ["A"])
    process(sessions, settings, old, t)
    recent = new_run(api, employer, ["B"])
    process(sessions, settings, recent, t)
    running = new_run(api, make_employer("Busy"), ["C"])
    with session_scope(sessions) as s:
        s.execute(
            update(SyncRun).where(SyncRun.id == old).values(finished_at=t - timedelta(days=31))
        )
        s.execute(
            update(SyncRun).where(SyncRun.id == running).values(created_at=t - timedelta(days=90))
        )
    with session_scope(sessions) as s:
        assert sync_work.purge(s, now=t, retention_days=30) == 1
    session.expire_all()
    assert {r.id for r in session.scalars(select(SyncRun))} == {recent, running}
    left = session.scalar(select(func.count()).select_from(SyncItem).where(SyncItem.run_id == old))
    assert left == 0
    assert jobs_named(session, employer.id) == {"A": 1, "B": 1}  # the jobs stay


def test_the_worker_counts_the_items_it_applies_by_outcome(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    from workers.observability import SYNC_ITEMS

    before = {o: SYNC_ITEMS.labels(o)._value.get() for o in ("created", "failed")}
    run_id = new_run(api, employer, ["A", "B"])
    api.post(SYNCS, json={}, key=employer.key)  # refused: changes nothing
    with session_scope(sessions) as s:
        s.execute(
            update(SyncItem)
            .where(SyncItem.run_id == run_id, SyncItem.position == 2)
            .values(body='{"referenceId": "B"}')
        )
    process(sessions, settings, run_id, utcnow())
    after = {o: SYNC_ITEMS.labels(o)._value.get() for o in ("created", "failed")}
    assert (after["created"] - before["created"], after["failed"] - before["failed"]) == (1, 1)


def test_metrics_count_runs_by_status(
    api: Any, employer: Any, make_employer: Any, sessions: Any, settings: Settings
) -> None:
    done = new_run(api, employer, ["A"])
    process(sessions, settings, done, utcnow())
    new_run(api, make_employer("Queued"), ["A"])
    text = api.get("/metrics").text
    assert 'jobpost_syncs{status="completed"} 1.0' in text
    assert 'jobpost_syncs{status="queued"} 1.0' in text
    assert 'jobpost_syncs{status="running"} 0.0' in text


def test_a_completed_run_emits_sync_completed_once_and_a_dry_run_none(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    import json

    from models.db.entities import WebhookEndpoint, WebhookMessage

    t = utcnow()
    with session_scope(sessions) as s:
        s.add(
            WebhookEndpoint(
                employer_id=employer.id,
                url="https://hooks.example.com/in",
                events=webhook_messages.events_json(["sync.completed"]),
                status="enabled",
                secret="token",
                created_at=t,
                updated_at=t,
            )
        )
    dry = new_run(api, employer, ["A"], dryRun=True)
    process(sessions, settings, dry, t)
    real = new_run(api, employer, ["A", "B"])
    process(sessions, settings, real, t)
    process(sessions, settings, real, t)  # again: nothing more to do, nothing emitted
    session.expire_all()
    messages = session.scalars(select(WebhookMessage)).all()
    assert [m.type for m in messages] == ["sync.completed"]
    data = json.loads(messages[0].payload)["data"]
    assert data == api.get(f"{SYNCS}/{real}", key=employer.key).json
    assert (data["status"], data["created"]) == ("completed", 2)


def test_an_item_that_would_republish_a_taken_down_job_fails_with_job_taken_down(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    """C11 and C13: the item fails with the entry job_taken_down; the job stays down and
    the run goes on."""
    job = api.post("/api/v1.1/jobs", json=item("DOWN", status="active"), key=employer.key).json
    take_down(api, sessions, job["id"])
    body = {"mode": "upsert", "jobs": [item("DOWN", status="active"), item("NEXT")]}
    started = api.post(SYNCS, json=body, key=employer.key)
    assert started.status_code == 202, started.text
    run_id = started.json["id"]
    assert process(sessions, settings, run_id, utcnow()) == "completed"
    assert [o[:2] for o in outcomes(session, run_id)] == [("DOWN", "failed"), ("NEXT", "created")]
    items = api.get(f"{SYNCS}/{run_id}/items", key=employer.key).json["data"]
    assert [(e["field"], e["code"]) for e in items[0]["errors"]] == [("status", "job_taken_down")]
    read = api.get(f"/api/v1.1/jobs/{job['id']}", key=employer.key).json
    assert read["status"] == "archived" and read["takenDown"] is True


# --- batches (models.syncs.batches) ---------------------------------------------------------------


def items_page(api: Any, account: Any, run_id: int) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = api.get(f"{SYNCS}/{run_id}/items", key=account.key).json["data"]
    return data


def test_a_place_new_to_the_list_is_location_added_on_the_first_item_of_a_batch_naming_it(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    """As a PUT loop would say it: only the write that adds the place (C10)."""
    first = {"description": "Vanderhoof, BC"}
    other = {"description": "Fort St. James, BC"}
    refs = {"A": [first], "B": [first], "C": [{"description": "Toronto, ON"}, other]}
    body = {"mode": "upsert", "jobs": [item(r, locations=where) for r, where in refs.items()]}
    run_id = api.post(SYNCS, json=body, key=employer.key).json["id"]
    assert process(sessions, settings, run_id, utcnow()) == "completed"
    added = [
        [w["field"] for w in i["warnings"] if w["code"] == "location_added"]
        for i in items_page(api, employer, run_id)
    ]
    assert added == [["locations[0].description"], [], ["locations[1].description"]]


def test_a_batch_that_raises_is_rolled_back_and_its_items_applied_one_by_one(
    api: Any,
    employer: Any,
    sessions: Any,
    settings: Settings,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from models.jobs import rows as job_rows

    existing = api.post("/api/v1.1/jobs", json=item("OLD", title="Old"), key=employer.key).json
    real = job_rows.insert_many

    inserted: list[int] = []

    def insert_then_fail(connection: Any, written: Any, at: Any) -> Any:
        inserted.append(len(real(connection, written, at)))  # then lost with the batch
        raise RuntimeError("the database went away mid-batch")

    monkeypatch.setattr(job_rows, "insert_many", insert_then_fail)
    body = {
        "mode": "upsert",
        "jobs": [item("A"), {"referenceId": "OLD", "title": "New"}, item("B")],
    }
    run_id = api.post(SYNCS, json=body, key=employer.key).json["id"]
    assert process(sessions, settings, run_id, utcnow()) == "completed"
    assert inserted == [1]  # A was written in the batch, then rolled back with it
    assert [o[:2] for o in outcomes(session, run_id)] == [
        ("A", "created"),
        ("OLD", "updated"),
        ("B", "created"),
    ]
    assert jobs_named(session, employer.id) == {"A": 1, "OLD": 2, "B": 1}  # none twice
    assert [i["jobId"] for i in items_page(api, employer, run_id)][1] == existing["id"]


def test_a_referenceid_created_meanwhile_is_updated_as_put_would_not_created_twice(
    api: Any,
    employer: Any,
    sessions: Any,
    settings: Settings,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batch read no job R, then found R taken at its insert (a concurrent PUT's)."""
    from models.jobs import rows as job_rows

    run_id = new_run(api, employer, ["R", "S"])
    existing = api.post("/api/v1.1/jobs", json=item("R", title="Theirs"), key=employer.key).json
    real = job_rows.lock_many
    monkeypatch.setattr(
        job_rows,
        "lock_many",
        lambda c, e, refs: {k: v for k, v in real(c, e, refs).items() if k != "R"},
    )
    assert process(sessions, settings, run_id, utcnow()) == "completed"
    assert [o[:2] for o in outcomes(session, run_id)] == [("R", "updated"), ("S", "created")]
    assert items_page(api, employer, run_id)[0]["jobId"] == existing["id"]
    assert jobs_named(session, employer.id) == {"R": 2, "S": 1}


def test_after_taking_a_run_back_the_first_batch_is_applied_one_item_at_a_time(
    api: Any,
    employer: Any,
    sessions: Any,
    settings: Settings,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dead worker may have died of any item of its batch: applied one by one, the
    next death is blamed on the item that caused it (C11)."""
    from models.syncs import batches as sync_batches

    run_id = new_run(api, employer, ["A", "B", "C", "D", "E"])
    t0 = utcnow()
    assert claim(sessions, run_id, t0) is not None  # and dies
    batches: list[list[str]] = []
    real = sync_batches.apply_prepared

    def spy(session: Session, run: Any, employer_row: Any, prepared: Any, **kw: Any) -> Any:
        batches.append([item.pending.reference_id for item in prepared.items])
        return real(session, run, employer_row, prepared, **kw)

    monkeypatch.setattr(sync_batches, "apply_prepared", spy)
    monkeypatch.setattr(syncing, "BATCH", 2)
    assert process(sessions, settings, run_id, t0 + timedelta(seconds=LEASE + 1)) == "completed"
    assert batches == [["C", "D"]]  # A and B one by one; E alone
    assert [o[:2] for o in outcomes(session, run_id)] == [(r, "created") for r in "ABCDE"]


def test_a_failed_item_names_the_job_its_referenceid_names(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    """C11: jobId is null only when no job exists; in a batch and one by one (a dry run)."""
    job = api.post("/api/v1.1/jobs", json=item("HAS"), key=employer.key).json
    jobs = [{"referenceId": "HAS", "title": ""}, {"referenceId": "NONE", "title": "x"}]
    for dry in (False, True):
        body = {"mode": "upsert", "jobs": jobs, "dryRun": dry}
        run_id = api.post(SYNCS, json=body, key=employer.key).json["id"]
        assert process(sessions, settings, run_id, utcnow()) == "completed"
        listed = items_page(api, employer, run_id)
        assert [(i["outcome"], i["jobId"]) for i in listed] == [
            ("failed", job["id"]),
            ("failed", None),
        ]
