"""C10: a write whose merged job (the stored form of every field, after cleaning and
resolving) equals the stored job stores nothing: version, ETag, updatedAt and publishDate
stay, and it answers 200 as usual."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from models.db.entities import Job
from tests.api.test_job_dry_runs import stored
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, job_body, read_shape

STORED = job_body(
    referenceId="SAME-1",
    status="active",
    title="Head Baker",
    locations=[{"description": "Montréal, QC"}, {"description": "Toronto, ON"}],
    categories=[{"id": 12}, {"id": 17}],
    salary={"amount": 60000, "maxAmount": 70000.5, "period": {"id": 1}},
    description="<p>Bake <strong>bread</strong>.</p>",
)

# The same job written otherwise: each resolves, cleans or trims to what is stored.
ALIKE = [
    pytest.param({"title": "  Head Baker  "}, id="title-untrimmed"),
    pytest.param(
        {"locations": [{"description": "montreal, qc"}, {"id": 6167865}]},
        id="places-written-otherwise",
    ),
    pytest.param(
        {"locations": [{"description": "Montreal, Quebec"}, {"description": "TORONTO"}]},
        id="places-by-province-name",
    ),
    pytest.param(
        {"salary": {"amount": 60000.00, "maxAmount": 70000.50, "period": {"id": 1}}},
        id="amounts-with-zeros",
    ),
    pytest.param(
        {"salary": {"amount": 6e4, "maxAmount": 70000.5, "period": {"id": 1, "name": "x"}}},
        id="amounts-as-exponents",
    ),
    pytest.param(
        {"description": "<p>Bake <strong>bread</strong>.</p><!-- x -->"}, id="html-cleaned"
    ),
    pytest.param({"status": "active", "closeDate": None}, id="close-date-null-is-the-default"),
    pytest.param({"applicationUrl": "https://ignored.test/"}, id="the-other-routes-address"),
    pytest.param({}, id="referenceId-alone"),
]


def row(sessions: sessionmaker[Session], job_id: int) -> Any:
    with sessions() as s:
        return s.execute(
            select(Job.version, Job.updated_at, Job.publish_date).where(Job.id == job_id)
        ).one()


@pytest.mark.parametrize("change", ALIKE)
@pytest.mark.parametrize("how", ["by-id", "by-reference", "overridden"])
def test_a_write_that_changes_nothing_stores_nothing(
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    clock: Clock,
    change: dict[str, Any],
    how: str,
) -> None:
    job = create_job(api, employer, **STORED)
    path = f"{JOBS}/{job['id']}"
    etag = api.get(path, key=employer.key).headers["etag"]
    clock.today += timedelta(days=1)  # a write that stored would show it
    before = stored(sessions, employer.id)
    body = {"referenceId": "SAME-1", **change}
    if how == "by-id":
        result = api.put(path, json=body, key=employer.key)
    elif how == "by-reference":
        result = api.put(JOBS, json=body, key=employer.key)
    else:
        headers = {"X-HTTP-Method-Override": "PUT"}
        result = api.post(JOBS, json=body, key=employer.key, headers=headers)
    assert result.status_code == 200, result.text
    assert read_shape(result.json) == job and result.headers["etag"] == etag
    assert stored(sessions, employer.id) == before  # version and updatedAt too
    read = api.get(path, key=employer.key)
    assert read.json == job and read.headers["etag"] == etag


def test_a_change_after_an_unchanged_write_moves_everything(
    api: Api, employer: Account, sessions: sessionmaker[Session], clock: Clock
) -> None:
    job = create_job(api, employer, **STORED)
    path = f"{JOBS}/{job['id']}"
    created = row(sessions, job["id"])
    etag = api.get(path, key=employer.key).headers["etag"]
    assert api.put(path, json={"status": "active"}, key=employer.key).status_code == 200
    assert row(sessions, job["id"]) == created
    changed = api.put(path, json={"title": "Night Baker"}, key=employer.key)
    after = row(sessions, job["id"])
    assert after.version == created.version + 1 and after.updated_at > created.updated_at
    assert api.get(path, key=employer.key).headers["etag"] == changed.headers["etag"] != etag
    # Re-publishing is a change: publishDate moves to today (C5), and only then.
    clock.today += timedelta(days=2)
    api.put(path, json={"status": "archived"}, key=employer.key)
    archived = row(sessions, job["id"])
    again = api.put(path, json={"status": "archived"}, key=employer.key)
    assert again.status_code == 200 and row(sessions, job["id"]) == archived
    republished = api.put(path, json={"status": "active"}, key=employer.key)
    assert republished.json["publishDate"] == clock.today.isoformat()
    assert row(sessions, job["id"]).publish_date == clock.today


def test_an_unchanged_active_job_keeps_its_publish_date(
    api: Api, employer: Account, sessions: sessionmaker[Session], clock: Clock
) -> None:
    """Sending an active job again (`status: active` included) does not re-publish it."""
    job = create_job(api, employer, **STORED)
    clock.today += timedelta(days=3)
    again = api.put(JOBS, json={**STORED, "closeDate": job["closeDate"]}, key=employer.key)
    assert again.status_code == 200 and again.json["publishDate"] == job["publishDate"]
    assert row(sessions, job["id"]).version == 1


def test_an_unchanged_write_keeps_the_kept_copy(api: Api, employer: Account) -> None:
    """The process's kept representation (api.cache) is served while the version holds: an
    unchanged write does not move it, a change does."""
    job = create_job(api, employer, **STORED)
    path = f"{JOBS}/{job['id']}"
    first = api.get(path, key=employer.key)
    api.put(path, json={"title": "Head Baker"}, key=employer.key)
    assert api.get(path, key=employer.key).content == first.content
    api.put(path, json={"title": "Night Baker"}, key=employer.key)
    assert api.get(path, key=employer.key).json["title"] == "Night Baker"


def test_a_dry_run_of_an_unchanged_write_answers_the_stored_job(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, **STORED)
    before = stored(sessions, employer.id)
    dry = api.put(f"{JOBS}?dryRun=true", json=STORED, key=employer.key)
    assert dry.status_code == 200 and read_shape(dry.json) == job
    assert stored(sessions, employer.id) == before
