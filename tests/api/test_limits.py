"""C23: the keyed API's limits, per key and per employer, by plan; the RateLimit headers; 429
with Retry-After; a sync run's jobs counted one each; a Redis that is down lets requests by;
and RFC 8288 Link headers on lists and feeds."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api import quotas
from api.app import Collaborators, create_app
from models.core.settings import Settings
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, job_body, problem

SYNCS = "/api/v1.1/syncs"


def limited(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    key: str,
    employer: str,
    counters: quotas.Counters | None = None,
) -> Api:
    """An app whose standard plan allows `key` per key and `employer` per employer."""
    rules = (("standard", key, employer), ("unlimited", "off", "off"))
    tuned = dataclasses.replace(settings, api_rate_limits=rules)
    counted = quotas.Quotas(quotas.Plans.of(tuned), counters or quotas.Counters())
    return Api(create_app(tuned, sessions, Collaborators(quotas=counted), today=clock))


def second_key(sessions: sessionmaker[Session], employer: Account) -> str:
    from models import employers

    with sessions() as s:
        issued = employers.issue_key(s, employer.id)
        s.commit()
    return issued.key


def test_each_answer_says_what_is_left_and_the_next_is_429_with_retry_after(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    api = limited(settings, sessions, clock, "3/minute", "5/minute")
    for left in (2, 1, 0):
        answer = api.get(JOBS, key=employer.key)
        assert answer.status_code == 200
        assert answer.headers["RateLimit-Policy"] == '"key";q=3;w=60, "employer";q=5;w=60'
        found = re.fullmatch(r'"key";r=(\d+);t=(\d+)', answer.headers["RateLimit"])
        assert found is not None and int(found[1]) == left and 1 <= int(found[2]) <= 60
    refused = api.get(JOBS, key=employer.key)
    body = problem(refused, 429, "rate_limited")
    assert "key" in body["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["RateLimit"].startswith('"key";r=0;')
    # The employer's other key has its own quota, but the employer's is shared: the four
    # requests so far (a refused one counts too) leave it one.
    other = second_key(sessions, employer)
    last = api.get(JOBS, key=other)
    assert last.status_code == 200 and last.headers["RateLimit"].startswith('"employer";r=0;')
    over = api.get(JOBS, key=other)
    assert "employer" in problem(over, 429, "rate_limited")["detail"]
    # Nothing else is counted: public routes take no key and no quota.
    assert api.get("/api/v1.1/categories").status_code == 200


def test_a_key_without_access_is_refused_before_it_counts(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    api = limited(settings, sessions, clock, "1/minute", "off")
    problem(api.get(JOBS, key="jp_not-a-key-at-all"), 401, "unauthorized")
    assert api.get(JOBS, key=employer.key).status_code == 200
    problem(api.get(JOBS, key=employer.key), 429, "rate_limited")


def test_a_sync_run_counts_each_job_and_one_over_the_limit_stores_nothing(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, employer: Account
) -> None:
    api = limited(settings, sessions, clock, "10/minute", "off")
    jobs = [job_body(referenceId=f"S-{i}") for i in range(11)]
    over = api.post(SYNCS, json={"mode": "upsert", "jobs": jobs}, key=employer.key)
    problem(over, 429, "rate_limited")
    assert api.get(SYNCS, key=employer.key).status_code == 429  # the 11 counted
    fresh = limited(settings, sessions, clock, "10/minute", "off")
    assert fresh.get(SYNCS, key=employer.key).json["data"] == []
    run = fresh.post(SYNCS, json={"mode": "upsert", "jobs": jobs[:9]}, key=employer.key)
    assert run.status_code == 202, run.text
    assert run.headers["RateLimit"].startswith('"key";r=0;')


def test_a_limiter_that_is_down_lets_requests_by(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    employer: Account,
    unused_port: int,
) -> None:
    import redis

    client = redis.Redis(port=unused_port, socket_timeout=0.05, socket_connect_timeout=0.05)
    api = limited(settings, sessions, clock, "1/minute", "1/minute", quotas.Counters(client))
    for _ in range(3):
        answer = api.get(JOBS, key=employer.key)
        assert answer.status_code == 200 and "RateLimit" not in answer.headers


def test_the_unlimited_plan_has_its_own_limits(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, make_employer: Any
) -> None:
    big = make_employer("Big Corp", plan="unlimited")
    api = limited(settings, sessions, clock, "1/minute", "1/minute")
    for _ in range(3):
        answer = api.get(JOBS, key=big.key)
        assert answer.status_code == 200 and "RateLimit" not in answer.headers


@pytest.mark.parametrize("raw", ["100/minute", "1/minute,", "a,b", "0/minute,1/minute"])
def test_a_limit_setting_that_is_not_two_rules_refuses_to_start(raw: str) -> None:
    with pytest.raises(ValueError, match="API_RATE_LIMIT_STANDARD"):
        Settings.from_env({"API_RATE_LIMIT_STANDARD": raw})


def links(answer: Any) -> dict[str, str]:
    return dict(
        (rel, url) for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', answer.headers["Link"])
    )


def test_lists_and_feeds_link_their_next_and_previous_pages(api: Api, employer: Account) -> None:
    for _ in range(3):
        create_job(api, employer)
    first = api.get(f"{JOBS}?pageSize=1", key=employer.key)
    assert links(first) == {"next": first.json["paging"]["next"]}
    middle = api.get(f"{JOBS}?pageSize=1&page=2", key=employer.key)
    assert links(middle) == {
        "prev": middle.json["paging"]["previous"],
        "next": middle.json["paging"]["next"],
    }
    last = api.get(f"{JOBS}?pageSize=1&page=3", key=employer.key)
    assert links(last) == {"prev": last.json["paging"]["previous"]}
    feed = api.get(f"{JOBS}?sort=updatedAt&pageSize=2", key=employer.key)
    assert links(feed) == {"next": feed.json["paging"]["next"]}
    alone = api.get(JOBS, key=employer.key)
    assert "Link" not in alone.headers  # one page: nothing to link
    assert "Link" not in api.get(f"{JOBS}?pageSize=0", key=employer.key).headers
