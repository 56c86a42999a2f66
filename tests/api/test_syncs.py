"""Sync runs over HTTP (C11): intake's outer shape, the resource, its items, open runs,
cancel, dry runs, snapshot archiving; the items applied in-process by the worker's own code
(workers.syncing), on SQLite and PostgreSQL. Real workers: tests/workers/test_sync_worker.py."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from models.core.dates import today_in
from models.core.settings import Settings
from models.db.entities import Job, SyncItem, SyncRun
from models.syncs import runs as syncs
from tests.factories import create_job, entries, job_body, problem
from workers import syncing

SYNCS = "/api/v1.1/syncs"
JSON = {"Content-Type": "application/json"}


def item(ref: str, **overrides: Any) -> dict[str, Any]:
    return {**job_body(**overrides), "referenceId": ref}


def post(api: Any, account: Any, body: Any, **kw: Any) -> Any:
    return api.post(SYNCS, json=body, key=account.key, **kw)


def started(api: Any, account: Any, body: Any, **kw: Any) -> dict[str, Any]:
    result = post(api, account, body, **kw)
    assert result.status_code == 202, result.text
    run: dict[str, Any] = result.json
    return run


def run_it(sessions: sessionmaker[Session], settings: Settings, run_id: int) -> str:
    """The worker's code, in this process, on the test's sessions."""
    return syncing.process(sessions, run_id, lease_seconds=300, timezone=settings.timezone)


def items_of(api: Any, account: Any, run_id: int, query: str = "") -> list[dict[str, Any]]:
    result = api.get(f"{SYNCS}/{run_id}/items?pageSize=100{query}", key=account.key)
    assert result.status_code == 200, result.text
    data: list[dict[str, Any]] = result.json["data"]
    return data


def job_by_ref(session: Session, employer_id: int, ref: str) -> Job | None:
    return session.scalars(
        select(Job).where(Job.employer_id == employer_id, Job.reference_id == ref)
    ).one_or_none()


# --- intake ---------------------------------------------------------------------------------


def test_a_run_is_accepted_with_its_items_stored_before_the_202(
    api: Any, employer: Any, session: Session
) -> None:
    result = post(api, employer, {"mode": "upsert", "jobs": [item("R-1"), item("R-2")]})
    assert result.status_code == 202, result.text
    run = result.json
    assert result.headers["location"] == f"http://127.0.0.1:8000{SYNCS}/{run['id']}"
    assert {k: run[k] for k in ("mode", "dryRun", "status", "total", "processed")} == {
        "mode": "upsert",
        "dryRun": False,
        "status": "queued",
        "total": 2,
        "processed": 0,
    }
    assert run["createdAt"].endswith("Z") and run["startedAt"] is None
    stored = session.scalars(select(SyncItem).where(SyncItem.run_id == run["id"])).all()
    assert [(i.position, i.reference_id, i.outcome) for i in stored] == [
        (1, "R-1", "pending"),
        (2, "R-2", "pending"),
    ]
    assert json.loads(stored[0].body or "") == item("R-1")
    assert api.get(f"{SYNCS}/{run['id']}", key=employer.key).json == run


def test_numbers_are_kept_exactly_as_sent(api: Any, employer: Any, session: Session) -> None:
    sent = '{"referenceId":"N","salary":{"amount":60000.10,"x":123456789012345678901234567890}}'
    body = '{"mode":"upsert","jobs":[' + sent + "]}"
    result = api.post(SYNCS, body=body, headers=JSON, key=employer.key)
    assert result.status_code == 202, result.text
    stored = session.scalars(select(SyncItem.body).where(SyncItem.run_id == result.json["id"]))
    assert stored.one() == sent


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"jobs": [item("A")]}, [("mode", "required")]),
        ({"mode": "full", "jobs": [item("A")]}, [("mode", "out_of_range")]),
        ({"mode": 1, "jobs": [item("A")]}, [("mode", "invalid_type")]),
        ({"mode": "upsert"}, [("jobs", "required")]),
        ({"mode": "upsert", "jobs": {"a": 1}}, [("jobs", "invalid_type")]),
        ({"mode": "upsert", "jobs": []}, [("jobs", "too_few")]),
        ({"mode": "snapshot", "jobs": []}, [("jobs", "too_few")]),
        ({"mode": "snapshot", "jobs": [], "allowEmpty": False}, [("jobs", "too_few")]),
        ({"mode": "upsert", "jobs": [item("A")], "open": "yes"}, [("open", "invalid_type")]),
        ({"mode": "upsert", "jobs": [item("A")], "dryRun": 1}, [("dryRun", "invalid_type")]),
        (
            {"mode": "upsert", "jobs": [item("A")], "allowEmpty": None, "open": 0},
            [("open", "invalid_type")],
        ),
        (
            {"mode": "upsert", "jobs": [item("A"), "B", None, [item("C")]]},
            [("jobs[1]", "invalid_type"), ("jobs[2]", "invalid_type"), ("jobs[3]", "invalid_type")],
        ),
        (
            {
                "mode": "snapshot",
                "jobs": [
                    job_body(),
                    item(""),
                    item("x" * 51),
                    item(7),  # type: ignore[arg-type]
                    {**job_body(), "referenceId": None},
                    item("x" * 50),
                ],
            },
            [
                ("jobs[0].referenceId", "required"),
                ("jobs[1].referenceId", "too_short"),
                ("jobs[2].referenceId", "too_long"),
                ("jobs[3].referenceId", "invalid_type"),
                ("jobs[4].referenceId", "required"),
            ],
        ),
        (
            {"mode": "upsert", "jobs": [item("A"), item("B"), item("A"), item("A")]},
            [("jobs[2].referenceId", "duplicate"), ("jobs[3].referenceId", "duplicate")],
        ),
        (
            {"mode": "nope", "open": 2, "jobs": [item("A"), item("A")]},
            [
                ("mode", "out_of_range"),
                ("open", "invalid_type"),
                ("jobs[1].referenceId", "duplicate"),
            ],
        ),
    ],
)
def test_every_outer_shape_rule_is_a_422_naming_the_field(
    api: Any, employer: Any, session: Session, body: Any, expected: list[tuple[str, str]]
) -> None:
    assert entries(post(api, employer, body)) == expected
    assert session.scalars(select(SyncRun)).all() == []  # nothing half-written


def test_10001_items_are_too_many_and_10000_are_not(api: Any, employer: Any) -> None:
    jobs = [{"referenceId": f"R{i}"} for i in range(10_001)]
    assert entries(post(api, employer, {"mode": "upsert", "jobs": jobs})) == [("jobs", "too_many")]
    run = started(api, employer, {"mode": "upsert", "jobs": jobs[:10_000]})
    assert run["total"] == 10_000


def test_referenceids_are_compared_exactly(api: Any, employer: Any) -> None:
    run = started(api, employer, {"mode": "upsert", "jobs": [item("a"), item("A"), item("a ")]})
    assert run["total"] == 3


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"{", "malformed_json"), (b"[]", "malformed_json"), (b"\xff", "malformed_json")],
)
def test_a_body_that_is_not_a_json_object_is_400(
    api: Any, employer: Any, body: bytes, code: str
) -> None:
    problem(api.post(SYNCS, body=body, headers=JSON, key=employer.key), 400, code)


def test_a_body_of_another_type_is_415(api: Any, employer: Any) -> None:
    headers = {"Content-Type": "text/plain"}
    result = api.post(SYNCS, body=b'{"mode":"upsert"}', headers=headers, key=employer.key)
    problem(result, 415, "unsupported_media_type")


OVER_50_MIB = b'{"mode":"upsert","jobs":[],"pad":"' + b"x" * (50 * 1024 * 1024) + b'"}'


def test_a_body_over_50_mib_is_413(api: Any, employer: Any, session: Session) -> None:
    result = api.post(SYNCS, body=OVER_50_MIB, headers=JSON, key=employer.key)
    problem(result, 413, "payload_too_large")
    assert session.scalars(select(SyncRun)).all() == []


def test_a_chunked_body_over_50_mib_is_413(api: Any, employer: Any) -> None:
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    result = api.post(
        SYNCS, body=OVER_50_MIB, headers=headers, key=employer.key, extras={"CONTENT_LENGTH": ""}
    )
    problem(result, 413, "payload_too_large")


def test_a_chunked_body_under_50_mib_is_taken(api: Any, employer: Any) -> None:
    """A body over the job writes' 1 MiB but within the runs' 50 MiB, sent chunked."""
    pad = "x" * (2 * 1024 * 1024)
    body = json.dumps({"mode": "upsert", "jobs": [item("BIG", description=f"<p>{pad}</p>")]})
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    result = api.post(
        SYNCS, body=body, headers=headers, key=employer.key, extras={"CONTENT_LENGTH": ""}
    )
    assert result.status_code == 202, result.text


def test_without_a_key_it_is_401(api: Any) -> None:
    problem(api.post(SYNCS, json={"mode": "upsert", "jobs": [item("A")]}), 401, "unauthorized")
    problem(api.get(SYNCS), 401, "unauthorized")


def test_one_run_at_a_time_409_sync_in_progress_before_422(
    api: Any, employer: Any, make_employer: Any, sessions: Any, settings: Settings
) -> None:
    run = started(api, employer, {"mode": "upsert", "jobs": [item("A")]})
    again = post(api, employer, {"mode": "upsert", "jobs": [item("B")]})
    problem(again, 409, "sync_in_progress")
    problem(post(api, employer, {"mode": "bad"}), 409, "sync_in_progress")  # 409 before 422
    other = make_employer("Other Co")
    started(api, other, {"mode": "upsert", "jobs": [item("A")]})  # runs are per employer
    assert run_it(sessions, settings, run["id"]) == "completed"
    started(api, employer, {"mode": "upsert", "jobs": [item("B")]})


def test_an_open_run_also_holds_the_employer(api: Any, employer: Any) -> None:
    started(api, employer, {"mode": "upsert", "open": True})
    problem(post(api, employer, {"mode": "upsert", "jobs": [item("B")]}), 409, "sync_in_progress")


def test_a_dry_run_query_value_other_than_true_or_false_is_400(api: Any, employer: Any) -> None:
    result = api.post(
        f"{SYNCS}?dryRun=yes", json={"mode": "upsert", "jobs": [item("A")]}, key=employer.key
    )
    assert entries(result, 400, "invalid_query") == [("dryRun", "invalid_format")]


# --- the resource, the list, another employer's run ------------------------------------------


def test_another_employers_run_is_404_everywhere(
    api: Any, employer: Any, make_employer: Any
) -> None:
    run = started(api, employer, {"mode": "upsert", "open": True})
    other = make_employer("Other Co")
    path = f"{SYNCS}/{run['id']}"
    problem(api.get(path, key=other.key), 404, "not_found")
    problem(api.get(f"{path}/items", key=other.key), 404, "not_found")
    problem(api.post(f"{path}/jobs", json={"jobs": []}, key=other.key), 404, "not_found")
    problem(api.post(f"{path}/start", key=other.key), 404, "not_found")
    problem(api.post(f"{path}/cancel", key=other.key), 404, "not_found")
    problem(api.get(f"{SYNCS}/999999", key=employer.key), 404, "not_found")
    problem(api.get(f"{SYNCS}/abc", key=employer.key), 404, "not_found")
    assert api.get(path, key=employer.key).json["status"] == "open"  # untouched


def test_the_list_is_newest_first_and_paged(
    api: Any, employer: Any, make_employer: Any, sessions: Any, settings: Settings
) -> None:
    ids = []
    for n in range(3):
        run = started(api, employer, {"mode": "upsert", "jobs": [item(f"R{n}")]})
        run_it(sessions, settings, run["id"])
        ids.append(run["id"])
    started(api, make_employer("Other Co"), {"mode": "upsert", "jobs": [item("X")]})
    page = api.get(f"{SYNCS}?pageSize=2", key=employer.key).json
    assert [r["id"] for r in page["data"]] == [ids[2], ids[1]]
    assert page["paging"]["total"] == 3 and page["paging"]["pages"] == 2
    assert page["paging"]["next"] == f"http://127.0.0.1:8000{SYNCS}?pageSize=2&page=2"
    last = api.get(f"{SYNCS}?pageSize=2&page=2", key=employer.key).json
    assert [r["id"] for r in last["data"]] == [ids[0]]
    assert entries(api.get(f"{SYNCS}?pageSize=0", key=employer.key), 400, "invalid_query") == [
        ("pageSize", "out_of_range")
    ]


# --- open runs ----------------------------------------------------------------------------------


def test_an_open_run_takes_more_items_then_starts(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    run = started(api, employer, {"mode": "upsert", "open": True, "jobs": [item("A")]})
    assert run["status"] == "open"
    path = f"{SYNCS}/{run['id']}"
    added = api.post(f"{path}/jobs", json={"jobs": [item("B"), item("C")]}, key=employer.key)
    assert added.status_code == 200, added.text
    assert added.json["total"] == 3 and added.json["status"] == "open"
    duplicate = api.post(f"{path}/jobs", json={"jobs": [item("D"), item("A")]}, key=employer.key)
    assert entries(duplicate) == [("jobs[1].referenceId", "duplicate")]
    within = api.post(f"{path}/jobs", json={"jobs": [item("E"), item("E")]}, key=employer.key)
    assert entries(within) == [("jobs[1].referenceId", "duplicate")]
    assert entries(api.post(f"{path}/jobs", json={"jobs": [3]}, key=employer.key)) == [
        ("jobs[0]", "invalid_type")
    ]
    assert entries(api.post(f"{path}/jobs", json={}, key=employer.key)) == [("jobs", "required")]
    go = api.post(f"{path}/start", key=employer.key)
    assert go.status_code == 202 and go.json["status"] == "queued" and go.json["total"] == 3
    problem(api.post(f"{path}/start", key=employer.key), 409, "sync_not_open")
    late = api.post(f"{path}/jobs", json={"jobs": [item("Z")]}, key=employer.key)
    problem(late, 409, "sync_not_open")
    assert run_it(sessions, settings, run["id"]) == "completed"
    assert [i["referenceId"] for i in items_of(api, employer, run["id"])] == ["A", "B", "C"]


def test_starting_an_empty_open_run_follows_the_rule_for_empty_runs(
    api: Any, employer: Any, make_employer: Any
) -> None:
    run = started(api, employer, {"mode": "upsert", "open": True})
    assert entries(api.post(f"{SYNCS}/{run['id']}/start", key=employer.key)) == [
        ("jobs", "too_few")
    ]
    other = make_employer("Other Co")
    run = started(api, other, {"mode": "snapshot", "open": True, "allowEmpty": True})
    assert api.post(f"{SYNCS}/{run['id']}/start", key=other.key).status_code == 202


def test_an_open_run_takes_at_most_a_million_items(
    api: Any, employer: Any, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(syncs, "PER_RUN", 3)  # the rule, at a size a test can fill
    run = started(api, employer, {"mode": "upsert", "open": True, "jobs": [item("A"), item("B")]})
    path = f"{SYNCS}/{run['id']}/jobs"
    assert entries(api.post(path, json={"jobs": [item("C"), item("D")]}, key=employer.key)) == [
        ("jobs", "too_many")
    ]
    assert api.post(path, json={"jobs": [item("C")]}, key=employer.key).status_code == 200


def test_action_endpoints_take_no_body_and_refuse_a_body_that_is_not_json(
    api: Any, employer: Any
) -> None:
    run = started(api, employer, {"mode": "upsert", "open": True, "jobs": [item("A")]})
    path = f"{SYNCS}/{run['id']}"
    refused = api.post(
        f"{path}/start", body=b"go", headers={"Content-Type": "text/plain"}, key=employer.key
    )
    problem(refused, 415, "unsupported_media_type")
    assert api.get(path, key=employer.key).json["status"] == "open"
    ignored = api.post(f"{path}/start", json={"whatever": 1}, key=employer.key)
    assert ignored.status_code == 202


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_a_queued_run_then_cancel_again_is_409(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    run = started(api, employer, {"mode": "snapshot", "jobs": [item("A")]})
    cancelled = api.post(f"{SYNCS}/{run['id']}/cancel", key=employer.key)
    assert cancelled.status_code == 200
    assert cancelled.json["status"] == "cancelled" and cancelled.json["finishedAt"] is not None
    problem(api.post(f"{SYNCS}/{run['id']}/cancel", key=employer.key), 409, "sync_not_open")
    problem(api.post(f"{SYNCS}/{run['id']}/start", key=employer.key), 409, "sync_not_open")
    assert run_it(sessions, settings, run["id"]) == "not_claimed"
    assert job_by_ref(session, employer.id, "A") is None
    assert [i["outcome"] for i in items_of(api, employer, run["id"])] == ["pending"]
    started(api, employer, {"mode": "upsert", "jobs": [item("B")]})  # no longer in progress


def test_a_completed_run_cannot_be_cancelled(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    run = started(api, employer, {"mode": "upsert", "jobs": [item("A")]})
    run_it(sessions, settings, run["id"])
    problem(api.post(f"{SYNCS}/{run['id']}/cancel", key=employer.key), 409, "sync_not_open")


# --- what items do --------------------------------------------------------------------------


def test_items_are_created_updated_or_failed_and_a_failure_stops_nothing(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    existing = create_job(api, employer, referenceId="OLD", title="Old title")
    create_job(api, employer, referenceId="UPD-BAD", title="Kept title")
    jobs = [
        item("NEW"),
        {"referenceId": "OLD", "title": "New title"},  # a partial update
        {"referenceId": "BAD", "title": "No other field"},  # a create needs the whole shape
        item("HTML", description="<script>x</script>"),
        {"referenceId": "UPD-BAD", "title": ""},
        item("LAST", status="archived"),
    ]
    run = started(api, employer, {"mode": "upsert", "jobs": jobs})
    assert run_it(sessions, settings, run["id"]) == "completed"
    done = api.get(f"{SYNCS}/{run['id']}", key=employer.key).json
    assert {
        k: done[k] for k in ("status", "total", "processed", "created", "updated", "failed")
    } == {
        "status": "completed",
        "total": 6,
        "processed": 6,
        "created": 2,
        "updated": 1,
        "failed": 3,
    }
    assert done["startedAt"] and done["finishedAt"]
    listed = items_of(api, employer, run["id"])
    assert [(i["referenceId"], i["outcome"]) for i in listed] == [
        ("NEW", "created"),
        ("OLD", "updated"),
        ("BAD", "failed"),
        ("HTML", "failed"),
        ("UPD-BAD", "failed"),
        ("LAST", "created"),
    ]
    assert listed[1]["jobId"] == existing["id"] and listed[2]["jobId"] is None
    assert ("locations", "required") in {(e["field"], e["code"]) for e in listed[2]["errors"]}
    assert [e["code"] for e in listed[3]["errors"]] == ["html_tag_not_allowed"]
    assert [(e["field"], e["code"]) for e in listed[4]["errors"]] == [("title", "too_short")]
    assert listed[0]["errors"] == [] and listed[0]["warnings"] == []
    assert job_by_ref(session, employer.id, "BAD") is None  # never half-written
    assert job_by_ref(session, employer.id, "UPD-BAD").title == "Kept title"  # type: ignore[union-attr]
    old = api.get(f"/api/v1.1/jobs/{existing['id']}", key=employer.key).json
    assert old["title"] == "New title"
    assert job_by_ref(session, employer.id, "LAST").status == "archived"  # type: ignore[union-attr]
    failed = items_of(api, employer, run["id"], "&outcome=failed")
    assert [i["referenceId"] for i in failed] == ["BAD", "HTML", "UPD-BAD"]
    bad = api.get(f"{SYNCS}/{run['id']}/items?outcome=gone", key=employer.key)
    assert entries(bad, 400, "invalid_query") == [("outcome", "out_of_range")]


def test_the_items_page_like_every_list(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    run = started(api, employer, {"mode": "upsert", "jobs": [item(f"R{n}") for n in range(5)]})
    page = api.get(f"{SYNCS}/{run['id']}/items?pageSize=2&page=2", key=employer.key).json
    assert [i["referenceId"] for i in page["data"]] == ["R2", "R3"]
    assert [i["outcome"] for i in page["data"]] == ["pending", "pending"]
    assert page["paging"]["total"] == 5 and page["paging"]["pages"] == 3
    assert page["paging"]["previous"].endswith(f"{SYNCS}/{run['id']}/items?pageSize=2&page=1")


def test_an_item_updates_the_job_as_it_is_when_its_turn_comes(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    job = create_job(api, employer, referenceId="R", title="First")
    run = started(
        api, employer, {"mode": "upsert", "jobs": [{"referenceId": "R", "status": "active"}]}
    )
    api.put(f"/api/v1.1/jobs/{job['id']}", json={"title": "Meanwhile"}, key=employer.key)
    run_it(sessions, settings, run["id"])
    now = api.get(f"/api/v1.1/jobs/{job['id']}", key=employer.key).json
    assert (now["title"], now["status"]) == ("Meanwhile", "active")


# --- snapshot archiving ---------------------------------------------------------------------


def test_a_snapshot_archives_what_it_leaves_out_and_nothing_else(
    api: Any, employer: Any, make_employer: Any, sessions: Any, settings: Settings
) -> None:
    kept = create_job(api, employer, referenceId="KEEP", status="active")
    gone_b = create_job(api, employer, referenceId="GONE-B", status="active")
    gone_a = create_job(api, employer, referenceId="GONE-A", status="active")
    no_ref = create_job(api, employer, status="active")
    draft = create_job(api, employer, referenceId="DRAFT", status="draft")
    archived = create_job(api, employer, referenceId="ARCH", status="archived")
    failing = create_job(api, employer, referenceId="FAILS", status="active")
    others = create_job(api, make_employer("Other Co"), referenceId="THEIRS", status="active")
    jobs = [{"referenceId": "KEEP", "title": "Kept"}, {"referenceId": "FAILS", "title": ""}]
    run = started(api, employer, {"mode": "snapshot", "jobs": jobs})
    after = create_job(api, employer, referenceId="AFTER", status="active")  # made after the run
    assert run_it(sessions, settings, run["id"]) == "completed"

    def status(job: dict[str, Any], key: str = employer.key) -> str:
        found: str = api.get(f"/api/v1.1/jobs/{job['id']}", key=key).json["status"]
        return found

    assert status(gone_a) == status(gone_b) == "archived"
    assert status(kept) == status(no_ref) == status(failing) == status(after) == "active"
    assert (status(draft), status(archived)) == ("draft", "archived")
    assert api.get(f"/api/v1.1/jobs/{others['id']}", key=make_employer("x").key).status_code == 404
    done = api.get(f"{SYNCS}/{run['id']}", key=employer.key).json
    assert (done["archived"], done["updated"], done["failed"], done["total"]) == (2, 1, 1, 2)
    listed = items_of(api, employer, run["id"])
    assert [(i["referenceId"], i["outcome"], i["jobId"]) for i in listed] == [
        ("KEEP", "updated", kept["id"]),
        ("FAILS", "failed", failing["id"]),  # a failed item names the job it failed to change
        ("GONE-A", "archived", gone_a["id"]),
        ("GONE-B", "archived", gone_b["id"]),
    ]
    assert [i["referenceId"] for i in items_of(api, employer, run["id"], "&outcome=archived")] == [
        "GONE-A",
        "GONE-B",
    ]


def test_an_empty_snapshot_with_allow_empty_archives_every_job_with_a_reference_id(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    a = create_job(api, employer, referenceId="A", status="active")
    b = create_job(api, employer, status="active")
    run = started(api, employer, {"mode": "snapshot", "jobs": [], "allowEmpty": True})
    run_it(sessions, settings, run["id"])
    assert api.get(f"/api/v1.1/jobs/{a['id']}", key=employer.key).json["status"] == "archived"
    assert api.get(f"/api/v1.1/jobs/{b['id']}", key=employer.key).json["status"] == "active"
    done = api.get(f"{SYNCS}/{run['id']}", key=employer.key).json
    assert (done["total"], done["archived"], done["status"]) == (0, 1, "completed")


def test_an_upsert_run_archives_nothing(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    a = create_job(api, employer, referenceId="A", status="active")
    run = started(api, employer, {"mode": "upsert", "jobs": [item("B")]})
    run_it(sessions, settings, run["id"])
    assert api.get(f"/api/v1.1/jobs/{a['id']}", key=employer.key).json["status"] == "active"


# --- dry runs -------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["query", "body"])
def test_a_dry_run_stores_nothing_but_the_run_and_its_items(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session, how: str
) -> None:
    old = create_job(api, employer, referenceId="OLD", title="Old", status="active")
    left_out = create_job(api, employer, referenceId="LEFT", status="active")
    body: dict[str, Any] = {
        "mode": "snapshot",
        "jobs": [
            item("NEW", locations=[{"description": "Val-d'Or, QC"}]),
            {"referenceId": "OLD", "title": "Changed"},
            {"referenceId": "BAD"},
        ],
    }
    path = SYNCS
    if how == "query":
        path += "?dryRun=true"
    else:
        body["dryRun"] = True
    result = api.post(path, json=body, key=employer.key)
    assert result.status_code == 202 and result.json["dryRun"] is True
    run_id = result.json["id"]
    assert run_it(sessions, settings, run_id) == "completed"
    listed = items_of(api, employer, run_id)
    assert [(i["referenceId"], i["outcome"], i["jobId"]) for i in listed] == [
        ("NEW", "created", None),
        ("OLD", "updated", old["id"]),
        ("BAD", "failed", None),
        ("LEFT", "archived", left_out["id"]),
    ]
    done = api.get(f"{SYNCS}/{run_id}", key=employer.key).json
    assert (done["created"], done["updated"], done["failed"], done["archived"]) == (1, 1, 1, 1)
    assert job_by_ref(session, employer.id, "NEW") is None
    again = api.get(f"/api/v1.1/jobs/{old['id']}", key=employer.key).json
    assert again == old
    assert api.get(f"/api/v1.1/jobs/{left_out['id']}", key=employer.key).json == left_out


# --- Idempotency-Key --------------------------------------------------------------------------


def test_an_idempotent_retry_is_replayed_and_makes_one_run(
    api: Any, employer: Any, session: Session
) -> None:
    body = {"mode": "upsert", "jobs": [item("A")]}
    headers = {"Idempotency-Key": "sync-key-1"}
    first = post(api, employer, body, headers=headers)
    again = post(api, employer, body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.content == first.content and again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert len(session.scalars(select(SyncRun)).all()) == 1
    other = post(api, employer, {"mode": "upsert", "jobs": [item("B")]}, headers=headers)
    problem(other, 422, "idempotency_key_reused")


@pytest.mark.parametrize("how", ["query", "body"])
def test_a_dry_run_records_no_idempotency_key(
    api: Any, employer: Any, session: Session, how: str
) -> None:
    body: dict[str, Any] = {"mode": "upsert", "jobs": [item("A")]}
    path = SYNCS + ("?dryRun=true" if how == "query" else "")
    if how == "body":
        body["dryRun"] = True
    headers = {"Idempotency-Key": "dry-key"}
    first = api.post(path, json=body, key=employer.key, headers=headers)
    assert first.status_code == 202 and "idempotent-replayed" not in first.headers
    api.post(f"{SYNCS}/{first.json['id']}/cancel", key=employer.key)
    again = api.post(path, json=body, key=employer.key, headers=headers)
    assert again.status_code == 202 and "idempotent-replayed" not in again.headers
    assert again.json["id"] != first.json["id"]  # done again: nothing was recorded


def test_a_resend_is_unchanged_and_writes_nothing_and_items_carry_warnings(
    api: Any, employer: Any, sessions: Any, settings: Settings, session: Session
) -> None:
    soon = (today_in(settings.timezone) + timedelta(days=1)).isoformat()
    jobs = [item("A", status="active"), item("B", status="active", closeDate=soon)]
    first = started(api, employer, {"mode": "snapshot", "jobs": jobs})
    run_it(sessions, settings, first["id"])
    a = job_by_ref(session, employer.id, "A")
    assert a is not None
    version, updated_at = a.version, a.updated_at
    again = started(api, employer, {"mode": "snapshot", "jobs": jobs})
    assert run_it(sessions, settings, again["id"]) == "completed"
    done = api.get(f"{SYNCS}/{again['id']}", key=employer.key).json
    assert (done["unchanged"], done["created"], done["updated"], done["archived"]) == (2, 0, 0, 0)
    listed = items_of(api, employer, again["id"])
    assert [(i["referenceId"], i["outcome"]) for i in listed] == [
        ("A", "unchanged"),
        ("B", "unchanged"),
    ]
    assert [(w["field"], w["code"]) for w in listed[1]["warnings"]] == [
        ("closeDate", "closes_soon")
    ]
    session.expire_all()
    a = job_by_ref(session, employer.id, "A")
    assert a is not None and (a.version, a.updated_at) == (version, updated_at)


def test_an_updated_item_carries_what_it_changed_and_the_others_none(
    api: Any, employer: Any, sessions: Any, settings: Settings
) -> None:
    """C11: `changes` as a dry run's answer lists them (C10), in the batch and in a dry run."""
    create_job(api, employer, referenceId="CH-1", title="Old title")
    create_job(api, employer, referenceId="CH-2")
    jobs = [
        {"referenceId": "CH-1", "title": "New title", "categories": [{"id": 1}]},
        {"referenceId": "CH-2"},  # unchanged
        item("CH-3"),  # created
    ]
    for dry in ("true", "false"):  # the dry run first: the real one then finds the same
        run = started(api, employer, {"mode": "upsert", "jobs": jobs}, params={"dryRun": dry})
        assert run["dryRun"] is (dry == "true")
        assert run_it(sessions, settings, run["id"]) == "completed"
        found = {i["referenceId"]: i for i in items_of(api, employer, run["id"])}
        assert found["CH-1"]["outcome"] == "updated", dry
        assert found["CH-1"]["changes"] == [
            {"field": "title", "from": "Old title", "to": "New title"},
            {
                "field": "categories",
                "from": [{"id": 12, "name": "Hospitality & Tourism"}],
                "to": [{"id": 1, "name": "Accounting & Finance"}],
            },
        ], dry
        assert found["CH-2"]["changes"] == found["CH-3"]["changes"] == [], dry
