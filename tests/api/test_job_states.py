"""C5 states and dates: any transition; entering active re-publishes; archiving changes only
the status. The service date comes from the `clock` fixture (2026-03-10 unless moved)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from tests.factories import JOBS, create_job, read_shape

STATES = ["draft", "active", "archived"]


def put(api: Any, account: Any, job: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    result = api.put(f"{JOBS}/{job['id']}", json=body, key=account.key)
    assert result.status_code == 200, result.text
    return read_shape(result.json)


@pytest.mark.parametrize("status", STATES)
def test_create_takes_the_given_status(api: Any, employer: Any, status: str) -> None:
    """C5: created with the given status (default draft, see test_job_writes)."""
    assert create_job(api, employer, status=status)["status"] == status


@pytest.mark.parametrize("before", STATES)
@pytest.mark.parametrize("after", STATES)
def test_any_transition_is_allowed(api: Any, employer: Any, before: str, after: str) -> None:
    """C5: draft, active and archived in any direction, by a PUT sending only status."""
    job = create_job(api, employer, status=before)
    assert put(api, employer, job, {"status": after})["status"] == after


@pytest.mark.parametrize("before", ["draft", "archived"])
def test_entering_active_republishes_with_today(
    api: Any, employer: Any, clock: Any, before: str
) -> None:
    """C5: draft→active and archived→active set publishDate to today; a closeDate that is not
    before today is kept."""
    job = create_job(api, employer, status=before)
    clock.today = date(2026, 3, 25)
    active = put(api, employer, job, {"status": "active"})
    assert active["publishDate"] == "2026-03-25"
    assert active["closeDate"] == "2026-05-09"


@pytest.mark.parametrize("before", ["draft", "archived"])
def test_republishing_moves_a_past_close_date_to_today_plus_60(
    api: Any, employer: Any, clock: Any, before: str
) -> None:
    """C5: if closeDate is before today it becomes today + 60 days."""
    job = create_job(api, employer, status=before, closeDate="2026-03-15")
    clock.today = date(2026, 4, 1)
    active = put(api, employer, job, {"status": "active"})
    assert (active["publishDate"], active["closeDate"]) == ("2026-04-01", "2026-05-31")


def test_republishing_keeps_a_close_date_the_request_sets(
    api: Any, employer: Any, clock: Any
) -> None:
    """C5: … unless the same request sets closeDate."""
    job = create_job(api, employer, status="archived", closeDate="2026-03-15")
    clock.today = date(2026, 4, 1)
    active = put(api, employer, job, {"status": "active", "closeDate": "2026-04-10"})
    assert (active["publishDate"], active["closeDate"]) == ("2026-04-01", "2026-04-10")


def test_republishing_with_a_null_close_date_counts_from_the_new_publish_date(
    api: Any, employer: Any, clock: Any
) -> None:
    job = create_job(api, employer, status="draft")
    clock.today = date(2026, 4, 1)
    active = put(api, employer, job, {"status": "active", "closeDate": None})
    assert (active["publishDate"], active["closeDate"]) == ("2026-04-01", "2026-05-31")


def test_a_close_date_on_its_day_is_not_moved(api: Any, employer: Any, clock: Any) -> None:
    """C5: only a closeDate *before* today moves (a job is still active on its closeDate)."""
    job = create_job(api, employer, status="archived", closeDate="2026-04-01")
    clock.today = date(2026, 4, 1)
    assert put(api, employer, job, {"status": "active"})["closeDate"] == "2026-04-01"


def test_an_active_job_put_active_again_is_not_republished(
    api: Any, employer: Any, clock: Any
) -> None:
    """C5: only *entering* active publishes."""
    job = create_job(api, employer, status="active")
    clock.today = date(2026, 3, 20)
    assert put(api, employer, job, {"status": "active"})["publishDate"] == "2026-03-10"
    assert put(api, employer, job, {"title": "Renamed"})["publishDate"] == "2026-03-10"


@pytest.mark.parametrize(
    ("before", "after"),
    [("active", "archived"), ("active", "draft"), ("draft", "archived"), ("archived", "draft")],
)
def test_leaving_active_or_moving_between_others_changes_nothing_but_status(
    api: Any, employer: Any, clock: Any, before: str, after: str
) -> None:
    """C5: archiving changes nothing but the status (interface: other properties unchanged)."""
    job = create_job(api, employer, status=before, closeDate="2026-03-12", referenceId="S-1")
    clock.today = date(2026, 4, 1)
    changed = put(api, employer, job, {"status": after})
    assert changed == {**job, "status": after}


def test_archiving_by_reference_id_changes_only_status(api: Any, employer: Any) -> None:
    """Interface states table: PUT with status archived, by id or by referenceId."""
    job = create_job(api, employer, status="active", referenceId="ARCH-1")
    result = api.put(JOBS, json={"referenceId": "ARCH-1", "status": "archived"}, key=employer.key)
    assert result.status_code == 200 and read_shape(result.json) == {**job, "status": "archived"}


def test_archived_to_active_by_id_answers_the_full_job(api: Any, employer: Any) -> None:
    """Interface states table: archived → active by id; the response is the full job."""
    job = create_job(api, employer, status="archived")
    active = put(api, employer, job, {"status": "active"})
    assert active == {**job, "status": "active"}  # same day: publishDate is today already


def test_a_status_only_put_reports_a_bad_status(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    result = api.put(f"{JOBS}/{job['id']}", json={"status": "closed"}, key=employer.key)
    assert result.status_code == 422
    assert [(e["field"], e["code"]) for e in result.json["errors"]] == [("status", "out_of_range")]
