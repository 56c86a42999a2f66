"""C8 Applications over the API: the employer's view scoped to its own, filtered and paged (C6)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from models.db.entities import OutboxEntry
from tests.api.applying import API, apply, listed, received
from tests.api.applying import app as app
from tests.api.applying import enqueued as enqueued
from tests.api.applying import job as job
from tests.conftest import Api
from tests.factories import create_job, entries, problem

# --- Scoping, filters and paging (C8, C6) ----------------------------------------------------


def test_another_employers_application_is_404(
    api: Api, employer: Any, make_employer: Any, job: dict[str, Any]
) -> None:
    app_id = received(apply(api, job["id"]))
    other = make_employer("Birch Ltd")
    problem(api.get(f"{API}/applications/{app_id}", key=other.key), 404, "not_found")
    problem(api.get(f"{API}/applications/{app_id}/resume", key=other.key), 404, "not_found")
    problem(api.get(f"{API}/jobs/{job['id']}/applications", key=other.key), 404, "not_found")
    assert listed(api, other)["data"] == []
    assert listed(api, other, jobId=job["id"])["data"] == []


@pytest.mark.parametrize(
    "path", ["/applications/1", "/applications/1/resume", "/applications", "/jobs/1/applications"]
)
def test_the_employer_view_needs_a_key(api: Api, path: str) -> None:
    problem(api.get(API + path), 401, "unauthorized")


@pytest.mark.parametrize("raw", ["0", "abc", "99999999999"])
def test_an_unknown_application_is_404(api: Api, employer: Any, raw: str) -> None:
    problem(api.get(f"{API}/applications/{raw}", key=employer.key), 404, "not_found")


def test_the_applications_of_an_unknown_job_are_404(api: Api, employer: Any) -> None:
    problem(api.get(f"{API}/jobs/999999/applications", key=employer.key), 404, "not_found")


def test_an_archived_jobs_applications_are_still_listed(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    app_id = received(apply(api, job["id"]))
    archived = api.put(f"{API}/jobs/{job['id']}", json={"status": "archived"}, key=employer.key)
    assert archived.status_code == 200, archived.text
    page = listed(api, employer, f"{API}/jobs/{job['id']}/applications")
    assert [a["id"] for a in page["data"]] == [app_id]


def mark(sessions: sessionmaker[Session], app_id: int, status: str) -> None:
    with sessions() as s:
        s.execute(
            update(OutboxEntry).where(OutboxEntry.application_id == app_id).values(status=status)
        )
        s.commit()


def test_filters_by_job_and_status_newest_first(
    api: Api, employer: Any, job: dict[str, Any], sessions: sessionmaker[Session]
) -> None:
    second = create_job(api, employer, status="active", title="Pastry Chef")
    a1 = received(apply(api, job["id"]))
    a2 = received(apply(api, second["id"]))
    a3 = received(apply(api, job["id"]))
    mark(sessions, a3, "sent")

    def ids(path: str = f"{API}/applications", **params: Any) -> list[int]:
        return [a["id"] for a in listed(api, employer, path, **params)["data"]]

    assert ids() == [a3, a2, a1]
    assert ids(jobId=job["id"]) == [a3, a1]
    assert ids(jobId=second["id"]) == [a2]
    assert ids(status="sent") == [a3]
    assert ids(status="pending") == [a2, a1]
    assert ids(jobId=job["id"], status="pending") == [a1]
    assert ids(status="failed") == []
    assert ids(status="sending") == []  # C8: one of the four delivery states, a filter too
    assert ids(jobId=999999) == []
    assert ids(jobId="") == [a3, a2, a1]  # C1: an empty value means absent
    assert ids(f"{API}/jobs/{job['id']}/applications") == [a3, a1]
    assert ids(f"{API}/jobs/{job['id']}/applications", status="sent") == [a3]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "open"}, "status"),
        ({"status": "Pending"}, "status"),
        ({"jobId": "abc"}, "jobId"),
        ({"jobId": "-1"}, "jobId"),
        ({"jobId": "0"}, "jobId"),
        ({"jobId": "2147483648"}, "jobId"),
        ({"pageSize": "0"}, "pageSize"),
        ({"pageSize": "101"}, "pageSize"),
        ({"page": "abc"}, "page"),
    ],
)
def test_a_malformed_filter_is_400_invalid_query(
    api: Api, employer: Any, params: dict[str, str], field: str
) -> None:
    result = api.get(f"{API}/applications", key=employer.key, params=params)
    assert [f for f, _ in entries(result, 400, "invalid_query")] == [field]


def test_every_malformed_filter_is_listed(api: Api, employer: Any) -> None:
    # C1: `errors` lists every violated rule, naming each parameter.
    result = api.get(
        f"{API}/applications",
        key=employer.key,
        params={"jobId": "abc", "status": "open", "pageSize": "0"},
    )
    assert entries(result, 400, "invalid_query") == [
        ("jobId", "invalid_type"),
        ("status", "out_of_range"),
        ("pageSize", "out_of_range"),
    ]


@pytest.mark.parametrize("name", ["jobId", "status", "page", "pageSize"])
def test_a_filter_that_is_not_utf_8_is_400_invalid_query(
    api: Api, employer: Any, job: dict[str, Any], name: str
) -> None:
    # C1/C6: every paged list, both paths.
    for path in (f"{API}/applications", f"{API}/jobs/{job['id']}/applications"):
        if name == "jobId" and path != f"{API}/applications":
            continue
        result = api.get(path, key=employer.key, query_string=f"{name}=1%FF")
        assert entries(result, 400, "invalid_query") == [(name, "invalid_format")]


def test_a_bad_filter_on_an_unknown_job_is_400_before_404(api: Api, employer: Any) -> None:
    # C1 order: 400 before 404.
    result = api.get(f"{API}/jobs/999999/applications", key=employer.key, params={"status": "open"})
    assert entries(result, 400, "invalid_query") == [("status", "out_of_range")]


def test_the_job_list_rejects_a_bad_status_too(
    api: Api, employer: Any, job: dict[str, Any]
) -> None:
    result = api.get(
        f"{API}/jobs/{job['id']}/applications", key=employer.key, params={"status": "open"}
    )
    assert entries(result, 400, "invalid_query") == [("status", "out_of_range")]


def query_of(link: str) -> tuple[str, list[tuple[str, str]]]:
    parts = urlsplit(link)
    return parts.path, parse_qsl(parts.query)


def test_paging_links_carry_job_and_status(api: Api, employer: Any, job: dict[str, Any]) -> None:
    # C6 rules for every paged list: supplied filters, then pageSize and page, in that order.
    made = [received(apply(api, job["id"])) for _ in range(3)]
    jid = str(job["id"])
    page = listed(api, employer, jobId=jid, status="pending", pageSize=1, page=2)
    assert [a["id"] for a in page["data"]] == [made[1]]
    assert {k: page["paging"][k] for k in ("total", "page", "pages", "pageSize")} == {
        "total": 3,
        "page": 2,
        "pages": 3,
        "pageSize": 1,
    }
    carried = [("status", "pending"), ("jobId", jid), ("pageSize", "1")]  # C10's order
    assert query_of(page["paging"]["next"]) == (f"{API}/applications", [*carried, ("page", "3")])
    assert query_of(page["paging"]["previous"]) == (
        f"{API}/applications",
        [*carried, ("page", "1")],
    )
    assert page["paging"]["next"].startswith("http://")
    bare = listed(api, employer, pageSize=2)
    assert query_of(bare["paging"]["next"]) == (
        f"{API}/applications",
        [("pageSize", "2"), ("page", "2")],
    )
    path = f"{API}/jobs/{jid}/applications"
    by_job = listed(api, employer, path, status="pending", pageSize=1)
    assert query_of(by_job["paging"]["next"]) == (
        path,
        [("status", "pending"), ("pageSize", "1"), ("page", "2")],
    )
    assert by_job["paging"]["previous"] is None
    past = listed(api, employer, pageSize=2, page=5)
    assert past["data"] == [] and past["paging"]["next"] is None
