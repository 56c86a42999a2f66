"""C6 and C16: the job list's `workplaceType` filter, counted exactly, carried by the paging
links, combined with `q` and `status`, and refused where it means nothing; both databases."""

from __future__ import annotations

from typing import Any

from tests.factories import JOBS, create_job, entries

HOST = "http://127.0.0.1:8000"


def listing(api: Any, account: Any, **params: Any) -> dict[str, Any]:
    result = api.get(JOBS, key=account.key, params=params)
    assert result.status_code == 200, result.text
    body: dict[str, Any] = result.json
    return body


def test_the_list_keeps_the_jobs_of_one_workplace_type(
    api: Any, employer: Any, make_employer: Any
) -> None:
    for n in range(3):
        create_job(api, employer, title=f"Remote baker {n}", workplaceType="remote")
    create_job(api, employer, title="Hybrid baker", workplaceType="hybrid", status="active")
    create_job(api, employer, title="Site baker")
    other = make_employer("Other Corp")
    create_job(api, other, title="Their remote baker", workplaceType="remote")
    remote = listing(api, employer, workplaceType="remote", pageSize=2)
    assert [j["title"] for j in remote["data"]] == ["Remote baker 2", "Remote baker 1"]
    assert {j["workplaceType"] for j in remote["data"]} == {"remote"}
    assert remote["paging"]["total"] == 3 and remote["paging"]["pages"] == 2
    assert remote["paging"]["next"] == f"{HOST}{JOBS}?workplaceType=remote&pageSize=2&page=2"
    last = listing(api, employer, workplaceType="remote", pageSize=2, page=2)
    assert [j["title"] for j in last["data"]] == ["Remote baker 0"]
    on_site = listing(api, employer, workplaceType="onSite")
    assert [j["title"] for j in on_site["data"]] == ["Site baker"]
    both = listing(api, employer, workplaceType="hybrid", status="active", q="BAKER")
    assert [j["title"] for j in both["data"]] == ["Hybrid baker"]
    assert both["paging"]["total"] == 1
    none = listing(api, employer, workplaceType="hybrid", status="draft")
    assert none["data"] == [] and none["paging"]["total"] == 0
    everything = listing(api, employer)
    assert everything["paging"]["total"] == 5


def test_an_unknown_workplace_type_is_refused(api: Any, employer: Any) -> None:
    result = api.get(JOBS, key=employer.key, params={"workplaceType": "Remote"})
    assert entries(result, 400, "invalid_query") == [("workplaceType", "out_of_range")]


def test_the_change_feed_takes_no_workplace_type(api: Any, employer: Any) -> None:
    params = {"sort": "updatedAt", "workplaceType": "remote"}
    result = api.get(JOBS, key=employer.key, params=params)
    assert entries(result, 400, "invalid_query") == [("workplaceType", "not_applicable")]
