"""A resent sync item (C11) whose job is as the item's own last sync write left it is
unchanged without being checked again (models.syncs.digests), in-process on SQLite and
PostgreSQL. It answers exactly what a full check answers (the same as `PUT /jobs` with its
body), and is checked in full again after anything that could change that answer: another
write of the job, expiry, a take-down, a delete, the next day, the employer's plan or
compliance mode, a change of the rules' code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.dates import on_day, utcnow
from models.core.settings import Settings
from models.db.unit_of_work import session_scope
from models.jobs import upkeep
from models.jobs import writes as jobs
from models.syncs import digests as sync_digests
from tests import factories
from tests.factories import job_body
from workers import syncing

SYNCS = "/api/v1.1/syncs"
JOBS = "/api/v1.1/jobs"


def item(ref: str, **overrides: Any) -> dict[str, Any]:
    return {**job_body(**overrides), "referenceId": ref}


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The referenceIds of the sync items checked in full, in order (the rules of PUT)."""
    seen: list[str] = []
    plan_put, plan_create = jobs.plan_put, jobs.plan_create

    def put(session: Any, employer: Any, job: Any, body: Any, **kw: Any) -> Any:
        seen.append(body["referenceId"])
        return plan_put(session, employer, job, body, **kw)

    def create(session: Any, employer: Any, body: Any, **kw: Any) -> Any:
        seen.append(body["referenceId"])
        return plan_create(session, employer, body, **kw)

    monkeypatch.setattr(jobs, "plan_put", put)
    monkeypatch.setattr(jobs, "plan_create", create)
    yield seen


Sync = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def sync(
    api: Any,
    sessions: sessionmaker[Session],
    settings: Settings,
    clock: Any,
    caplog: pytest.LogCaptureFixture,
) -> Sync:
    """Run `items` as an upsert run of `account`, applied by the worker's code on the API's
    service date (`clock`), each batch in one transaction (none fell back to one item at a
    time); the run's items as the API lists them."""

    def run(account: Any, items: list[dict[str, Any]]) -> Any:
        started = api.post(SYNCS, json={"mode": "upsert", "jobs": items}, key=account.key)
        assert started.status_code == 202, started.text
        run_id = started.json["id"]
        moment = on_day(settings.timezone, clock.today, utcnow())
        done = syncing.process(
            sessions, run_id, lease_seconds=300, timezone=settings.timezone, now=lambda: moment
        )
        assert done == "completed"
        assert "a batch failed" not in caplog.text
        return api.get(f"{SYNCS}/{run_id}/items", key=account.key).json["data"]

    return run


def answers(found: list[dict[str, Any]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    return [
        (i["referenceId"], i["outcome"], [(w["field"], w["code"]) for w in i["warnings"]])
        for i in found
    ]


def test_a_resent_snapshot_is_unchanged_unchecked_and_answers_what_put_answers(
    api: Any, employer: Any, clock: Any, sync: Sync, checked: list[str]
) -> None:
    today = clock.today
    existing = api.put(JOBS, json=item("PART"), key=employer.key)
    assert existing.status_code == 201, existing.text
    items = [
        item("AMBIGUOUS", locations=[{"description": "Toronto, ON"}, {"description": "richmond"}]),
        item("SOON", status="active", closeDate=str(today + timedelta(days=2))),
        item("PAY", status="active", locations=[{"description": "Vancouver, BC"}], salary=None),
        item("PLAIN"),
        {"referenceId": "PART", "title": "Head Baker"},  # a partial update of a job it names
    ]
    first = sync(employer, items)
    assert [i["outcome"] for i in first] == ["created"] * 4 + ["updated"], [
        i["errors"] for i in first
    ]
    written = answers(first)
    assert ("locations[1].description", "location_ambiguous") in written[0][2]
    assert ("closeDate", "closes_soon") in written[1][2]
    assert ("salary", "pay_required") in written[2][2]
    del checked[:]

    again = sync(employer, items)
    assert checked == []  # not one item checked again
    assert [i["outcome"] for i in again] == ["unchanged"] * 5
    assert [i["jobId"] for i in again] == [i["jobId"] for i in first]
    for resent, body in zip(again, items, strict=True):  # what a full check answers
        put = api.put(JOBS, json=body, key=employer.key)
        assert put.status_code == 200, put.text
        assert resent["warnings"] == put.json["warnings"], body["referenceId"]
        assert resent["errors"] == []
    without_added = [
        (ref, [w for w in found if w[1] != "location_added"]) for ref, _o, found in written
    ]
    assert [(ref, found) for ref, _o, found in answers(again)] == without_added
    del checked[:]  # the PUTs' own checks
    assert sync(employer, items) == again  # PUTs that change nothing keep the digests
    assert checked == []


def test_a_changed_item_is_written_and_its_next_resend_is_unchanged_unchecked(
    employer: Any, sync: Sync, checked: list[str]
) -> None:
    sync(employer, [item("A"), item("B")])
    changed = [item("A", title="Head Baker"), item("B")]
    assert answers(sync(employer, changed)) == [("A", "updated", []), ("B", "unchanged", [])]
    assert checked[-1:] == ["A"]
    del checked[:]
    assert answers(sync(employer, changed)) == [("A", "unchanged", []), ("B", "unchanged", [])]
    assert checked == []


def put_title(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    result = api.put(JOBS, json={"referenceId": "A", "title": "Theirs"}, key=account.key)
    assert result.status_code == 200, result.text


def expire(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    """Expired as by a later day's run: the item, resent today, re-publishes the job."""
    with session_scope(sessions) as s:
        assert upkeep.expire(s, today=date(2030, 1, 1)) >= 1


def take_down(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    factories.take_down(api, sessions, job_id)


def delete(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    assert api.delete(f"{JOBS}/{job_id}", key=account.key).status_code == 204


def enforce(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    with session_scope(sessions) as s:
        employers.set_compliance(s, account.id, mode="enforce")


def downgrade(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    with session_scope(sessions) as s:
        employers.set_plan(s, account.id, "standard")


def new_rules(api: Any, account: Any, sessions: Any, job_id: int) -> None:
    """A deploy whose rules differ: the code's digest is another."""
    sync_digests._code.cache_clear()
    setattr(sync_digests, "_code", lambda: b"the rules of the next release")  # noqa: B010


# What each change does to the resent item "A" (pay_required: the item lacks pay in BC).
CHANGES: dict[str, tuple[Callable[..., None], str, list[tuple[str, str]]]] = {
    "another write": (put_title, "updated", [("salary", "pay_required")]),
    "expiry": (expire, "updated", [("salary", "pay_required")]),
    "take-down": (take_down, "failed", [("status", "job_taken_down")]),
    "delete": (delete, "created", [("salary", "pay_required")]),
    "compliance mode": (enforce, "failed", [("salary", "pay_required")]),
    "plan": (
        downgrade,
        "unchanged",
        [("autoRefresh", "auto_refresh_inactive"), ("salary", "pay_required")],
    ),
    "rules": (new_rules, "unchanged", [("salary", "pay_required")]),
}


@pytest.mark.parametrize("change", CHANGES)
def test_after_a_change_that_may_alter_its_answer_a_resent_item_is_checked_in_full(
    api: Any,
    make_employer: Any,
    sessions: Any,
    sync: Sync,
    checked: list[str],
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    make_change, outcome, found = CHANGES[change]
    account = make_employer("Resender", plan="unlimited")
    bc = {"locations": [{"description": "Vancouver, BC"}], "salary": None}
    body = item("A", status="active", autoRefresh=True, **bc)
    first = sync(account, [body])
    assert answers(first) == [("A", "created", [("salary", "pay_required")])]
    if change == "rules":
        monkeypatch.setattr(sync_digests, "_code", sync_digests._code)  # put back after
    make_change(api, account, sessions, first[0]["jobId"])
    del checked[:]
    resent = sync(account, [body])[0]
    assert checked == ["A"]
    said = resent["errors"] if outcome == "failed" else resent["warnings"]
    assert (resent["outcome"], [(e["field"], e["code"]) for e in said]) == (outcome, found)


def test_the_next_day_a_resent_item_is_checked_and_earns_that_days_warnings(
    employer: Any, clock: Any, sync: Sync, checked: list[str]
) -> None:
    body = item("A", status="active", closeDate=str(clock.today + timedelta(days=4)))
    assert answers(sync(employer, [body])) == [("A", "created", [])]
    assert answers(sync(employer, [body])) == [("A", "unchanged", [])]
    del checked[:]
    clock.today += timedelta(days=1)
    assert answers(sync(employer, [body])) == [("A", "unchanged", [("closeDate", "closes_soon")])]
    assert checked == ["A"]
