"""GET one job: its ETag and 304, and the representation each web process keeps
(`api.cache`), which must never outlive a change to the job, however the change was made
(C4 writes, C5 expiry and refresh, C2 one employer's view only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from api.cache import OVERHEAD, Representations
from models import employers
from models.core.settings import Settings
from models.db.entities import Job
from models.jobs import upkeep
from tests.conftest import Api
from tests.factories import JOBS, create_job, job_body, problem


def test_get_one_job_has_an_etag_and_a_matching_if_none_match_is_304(
    api: Any, employer: Any
) -> None:
    job = create_job(api, employer)
    first = api.get(f"{JOBS}/{job['id']}", key=employer.key)
    etag = first.headers["ETag"]
    assert first.headers["Cache-Control"] == "private, no-cache"
    again = api.get(f"{JOBS}/{job['id']}", key=employer.key, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == etag
    other = api.get(f"{JOBS}/{job['id']}", key=employer.key, headers={"If-None-Match": '"x"'})
    assert other.status_code == 200 and other.json == first.json


def test_every_write_answers_the_etag_a_get_of_the_job_answers(api: Any, employer: Any) -> None:
    """A client keeping the job it wrote revalidates it with If-None-Match without reading it
    again: POST, PUT by referenceId (created, updated) and PUT by id sent no ETag at all."""
    v = employer.key
    created = api.post(JOBS, key=v, json=job_body())
    path = f"{JOBS}/{created.json['id']}"
    writes: list[Callable[[], Any]] = [
        lambda: created,
        lambda: api.put(JOBS, key=v, json=job_body(referenceId="E-1")),
        lambda: api.put(JOBS, key=v, json={"referenceId": "E-1", "title": "Head baker"}),
        lambda: api.put(path, key=v, json={"title": "Baker"}),
    ]
    for write, status in zip(writes, [201, 201, 200, 200], strict=True):
        written = write()
        assert written.status_code == status
        etag = written.headers["ETag"]
        kept = api.get(f"{JOBS}/{written.json['id']}", key=v, headers={"If-None-Match": etag})
        assert kept.status_code == 304 and kept.headers["ETag"] == etag


def test_a_change_through_the_api_gives_a_new_body_and_etag(api: Any, employer: Any) -> None:
    """C4: PUT by id and PUT by referenceId both change what GET answers, at once."""
    job = create_job(api, employer, referenceId="R-1")
    path = f"{JOBS}/{job['id']}"
    etag = api.get(path, key=employer.key).headers["ETag"]
    assert api.put(path, key=employer.key, json={"title": "Head baker"}).status_code == 200
    changed = api.get(path, key=employer.key, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.json["title"] == "Head baker"
    assert changed.headers["ETag"] != etag
    upsert = {**job, "title": "Night baker"}
    del upsert["id"]
    assert api.put(JOBS, key=employer.key, json=upsert).status_code == 200
    assert api.get(path, key=employer.key).json["title"] == "Night baker"


def test_a_deleted_job_is_404_though_its_representation_was_kept(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    path = f"{JOBS}/{job['id']}"
    assert api.get(path, key=employer.key).status_code == 200
    assert api.delete(path, key=employer.key).status_code == 204
    problem(api.get(path, key=employer.key), 404, "not_found")


def test_a_kept_job_is_not_shown_to_another_employer(
    api: Any, employer: Any, make_employer: Any
) -> None:
    """C1/C2: existence never leaks, also when the job's representation is kept."""
    job = create_job(api, employer)
    path = f"{JOBS}/{job['id']}"
    etag = api.get(path, key=employer.key).headers["ETag"]
    other = make_employer("Birch Ltd")
    problem(api.get(path, key=other.key), 404, "not_found")
    problem(api.get(path, key=other.key, headers={"If-None-Match": etag}), 404, "not_found")
    problem(api.get(f"{JOBS}/99999999999", key=employer.key), 404, "not_found")


def test_expiry_and_refresh_done_outside_the_web_process_are_seen_at_once(
    api: Any, employer: Any, sessions: sessionmaker[Session], clock: Any
) -> None:
    """C5: the upkeep tasks write with set-based UPDATEs of their own; each raises the
    version, so the kept representation is not served after them."""
    with sessions() as s:
        employers.set_plan(s, employer.id, "unlimited")
        s.commit()
    job = create_job(api, employer, status="active", autoRefresh=True)
    path = f"{JOBS}/{job['id']}"
    assert api.get(path, key=employer.key).json["publishDate"] == clock.today.isoformat()

    later = clock.today + timedelta(days=8)
    with sessions() as s:
        assert upkeep.refresh(s, today=later) == 1
        s.commit()
    assert api.get(path, key=employer.key).json["publishDate"] == later.isoformat()

    close = date.fromisoformat(job["closeDate"])
    with sessions() as s:
        assert upkeep.expire(s, today=close + timedelta(days=1)) == 1
        s.commit()
    assert api.get(path, key=employer.key).json["status"] == "archived"


def test_every_write_raises_the_version_by_one(
    api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer)

    def version() -> int:
        with sessions() as s:
            return s.scalar(select(Job.version).where(Job.id == job["id"])) or 0

    assert version() == 1
    api.put(f"{JOBS}/{job['id']}", key=employer.key, json={"title": "Baker II"})
    api.put(f"{JOBS}/{job['id']}", key=employer.key, json={"title": "Baker III"})
    assert version() == 3


def test_the_kept_representations_stay_within_their_bytes() -> None:
    entry = 1000 + OVERHEAD
    kept = Representations[int](max_bytes=20 * entry)  # an entry may take a 16th
    for job_id in range(40):
        kept.put(job_id, 1, "Maple", b"x" * 1000)
    assert kept.size == 20 * entry and len(kept) == 20
    assert kept.get(0, 1, "Maple") is None  # the least recently used went first
    assert kept.get(39, 1, "Maple") is not None
    too_big = 20 * entry // 16 - OVERHEAD + 1
    big = kept.put(100, 1, "Maple", b"y" * too_big)  # too big to keep, still answered
    assert big.body == b"y" * too_big and kept.get(100, 1, "Maple") is None


@pytest.mark.parametrize(
    ("version", "name"), [(2, "Maple"), (1, "Maple Bakery")], ids=["version", "employer name"]
)
def test_a_kept_entry_is_served_only_for_its_version_and_employer_name(
    version: int, name: str
) -> None:
    kept = Representations[int](max_bytes=10_000)
    kept.put(7, 1, "Maple", b"{}")
    assert kept.get(7, version, name) is None
    assert kept.get(7, 1, "Maple") is None  # a stale entry is dropped, not kept aside
    assert kept.size == 0


def test_with_no_cache_every_get_builds_the_job_and_etags_still_work(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, employer: Any
) -> None:
    """JOB_CACHE_MB=0 keeps nothing; the answers are the same."""
    uncached = Api(create_app(dataclasses.replace(settings, job_cache_mb=0), sessions, today=clock))
    job = create_job(uncached, employer)
    path = f"{JOBS}/{job['id']}"
    first = uncached.get(path, key=employer.key)
    assert first.json == job
    etag = first.headers["ETag"]
    assert uncached.get(path, key=employer.key, headers={"If-None-Match": etag}).status_code == 304
    uncached.put(path, key=employer.key, json={"title": "Baker II"})
    changed = uncached.get(path, key=employer.key, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.json["title"] == "Baker II"
