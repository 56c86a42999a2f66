"""C10's change feed, in process on SQLite and PostgreSQL: `updatedAt` on jobs and headers
and every change that moves it, `sort=updatedAt` and `sort=receivedAt` walked with their
cursors, the lag, `updatedSince`/`receivedSince` as filters of the paged lists, and every
400. The feed's present is the app's clock (`Collaborators.now`), set ahead of the writes'
real time to see them, or at it to see the lag hold them back."""

from __future__ import annotations

import base64
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api.app import Collaborators, create_app
from models.core.dates import utcnow
from models.core.settings import Settings
from models.jobs import upkeep
from tests.conftest import Api, Clock
from tests.factories import JOBS, create_job, entries, job_body, read_shape, unstamped

APPLICATIONS = "/api/v1.1/applications"
HOST = "http://127.0.0.1:8000"
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


class Present:
    """The feed's present: `ahead` seconds past the real time (the writes' clock)."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def __call__(self) -> datetime:
        return utcnow() + timedelta(seconds=self.ahead)


@pytest.fixture
def present() -> Present:
    return Present(60.0)  # past the lag (5 s): every change made so far shows


@pytest.fixture
def api(settings: Settings, sessions: sessionmaker[Session], clock: Clock, present: Present) -> Api:
    return Api(create_app(settings, sessions, Collaborators(now=present), today=clock))


def feed(api: Api, account: Any, path: str = JOBS, **params: Any) -> dict[str, Any]:
    sort = "updatedAt" if path == JOBS else "receivedAt"
    result = api.get(path, key=account.key, params={"sort": sort, **params})
    assert result.status_code == 200, result.text
    body: dict[str, Any] = result.json
    return body


def follow(api: Api, account: Any, link: str) -> dict[str, Any]:
    parts = urlsplit(link)
    result = api.get(parts.path, key=account.key, query_string=parts.query)
    assert result.status_code == 200, result.text
    body: dict[str, Any] = result.json
    return body


def walk(api: Api, account: Any, first: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Every element from a feed's first page to its end, and the last `next`."""
    seen, page = list(first["data"]), first
    while len(page["data"]) == page["paging"]["pageSize"]:
        page = follow(api, account, page["paging"]["next"])
        seen += page["data"]
    return seen, page["paging"]["next"]


def query_of(link: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(link).query)


def ids(items: list[dict[str, Any]]) -> list[int]:
    return [item["id"] for item in items]


# --- updatedAt ---------------------------------------------------------------------------


def test_updated_at_is_in_the_job_and_its_header_with_milliseconds(api: Api, employer: Any) -> None:
    """C10: read-only updatedAt, RFC 3339 in UTC with milliseconds, in jobs and headers."""
    before = utcnow()
    job = create_job(api, employer)
    assert STAMP.fullmatch(job["updatedAt"]), job["updatedAt"]
    stamped = datetime.strptime(job["updatedAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert before - timedelta(milliseconds=1) <= stamped <= utcnow()
    (header,) = api.get(JOBS, key=employer.key).json["data"]
    assert header["updatedAt"] == job["updatedAt"]
    assert api.get(f"{JOBS}/{job['id']}", key=employer.key).json == job


def test_every_api_write_moves_updated_at_and_reads_do_not(api: Api, employer: Any) -> None:
    """POST, PUT by id and PUT by referenceId each stamp the job anew; the write answers the
    updatedAt (and ETag) a GET then shows, and GETs leave it be (C10, C4)."""
    v = employer.key
    job = read_shape(api.put(JOBS, key=v, json=job_body(referenceId="F-1")).json)
    path = f"{JOBS}/{job['id']}"
    stamps = [job["updatedAt"]]
    writes: list[tuple[str, dict[str, Any]]] = [
        (path, {"title": "Night Baker"}),
        (JOBS, {"referenceId": "F-1", "title": "Day Baker"}),
        (path, {"status": "active"}),
    ]
    for target, body in writes:
        written = api.put(target, key=v, json=body)
        assert written.status_code == 200, written.text
        read = api.get(path, key=v)
        assert read.json == read_shape(written.json)
        assert read.headers["ETag"] == written.headers["ETag"]
        stamps.append(read.json["updatedAt"])
        assert api.get(path, key=v).json["updatedAt"] == stamps[-1]  # a read changes nothing
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_updated_at_written_in_a_body_is_ignored(api: Api, employer: Any) -> None:
    """C4 and C10: updatedAt is read-only, ignored when written, like id and publishDate."""
    job = create_job(api, employer, updatedAt="2001-01-01T00:00:00.000Z")
    assert job["updatedAt"] > "2026"
    again = api.put(
        f"{JOBS}/{job['id']}", key=employer.key, json={**job, "updatedAt": "not a time"}
    )
    assert again.status_code == 200 and again.json["updatedAt"] >= job["updatedAt"]


def test_expiry_and_refresh_move_updated_at_and_the_cached_copy_follows(
    api: Api, employer: Any, make_employer: Any, sessions: sessionmaker[Session], clock: Clock
) -> None:
    """C10: expiry and refresh are stored changes; the copy a web process keeps (and its
    ETag) follows them, since every change raises the version too."""
    unlimited = make_employer("Big Co", plan="unlimited")
    closing = create_job(api, employer, status="active", closeDate="2026-03-11")
    fresh = create_job(api, unlimited, status="active", autoRefresh=True)
    for account, job in ((employer, closing), (unlimited, fresh)):
        assert api.get(f"{JOBS}/{job['id']}", key=account.key).json == job  # kept
    later = date(2026, 3, 20)
    clock.today = later
    assert upkeep.expire_and_refresh(sessions, today=later) == upkeep.Refreshed(1, 1)
    expired = api.get(f"{JOBS}/{closing['id']}", key=employer.key)
    refreshed = api.get(f"{JOBS}/{fresh['id']}", key=unlimited.key)
    assert expired.json["status"] == "archived"
    assert refreshed.json["publishDate"] == "2026-03-20"
    for before, after in ((closing, expired), (fresh, refreshed)):
        assert after.json["updatedAt"] > before["updatedAt"]
    changed = feed(api, employer)["data"]
    assert [(j["id"], j["updatedAt"]) for j in changed] == [
        (closing["id"], expired.json["updatedAt"])
    ]


def test_upkeep_runs_in_batches_until_nothing_is_due(
    api: Api, employer: Any, sessions: sessionmaker[Session]
) -> None:
    """Expiry in transactions of at most `batch` jobs (C10: each well within the lag), and
    the batches together archive every due job (C5)."""
    made = [create_job(api, employer, status="active", closeDate="2026-03-11") for _ in range(5)]
    day = date(2026, 3, 20)
    assert upkeep.in_batches(sessions, upkeep.expire, today=day, batch=2) == 5
    assert upkeep.in_batches(sessions, upkeep.expire, today=day, batch=2) == 0
    states = {j["id"]: j["status"] for j in api.get(JOBS, key=employer.key).json["data"]}
    assert states == {j["id"]: "archived" for j in made}


# --- the jobs feed -----------------------------------------------------------------------


def test_the_feed_walks_by_updated_at_then_id_with_a_cursor(api: Api, employer: Any) -> None:
    """C10: ascending (updatedAt, id), paged by `next`, whose query carries sort, pageSize
    and the cursor; a job changed later comes after the others."""
    made = [create_job(api, employer, title=f"Job {i}") for i in range(5)]
    api.put(f"{JOBS}/{made[1]['id']}", key=employer.key, json={"title": "Changed"})
    first = feed(api, employer, pageSize=2)
    assert first["paging"]["pageSize"] == 2 and set(first["paging"]) == {"pageSize", "next"}
    link = first["paging"]["next"]
    assert link.startswith(f"{HOST}{JOBS}?")
    assert [k for k, _v in query_of(link)] == ["sort", "pageSize", "cursor"]
    seen, _ = walk(api, employer, first)
    order = [made[i]["id"] for i in (0, 2, 3, 4, 1)]
    assert ids(seen) == order
    stamps = [(j["updatedAt"], j["id"]) for j in seen]
    assert stamps == sorted(stamps)
    assert seen[-1]["title"] == "Changed"


def test_a_feed_element_carries_the_work_arrangement(api: Api, employer: Any) -> None:
    """C16: the feed's elements are list elements, workplaceType and applicantLocations too."""
    job = create_job(api, employer, workplaceType="remote", applicantLocations=["PE", "NS"])
    (element,) = feed(api, employer)["data"]
    assert (element["workplaceType"], element["applicantLocations"]) == ("remote", ["PE", "NS"])
    assert element["id"] == job["id"]


def test_the_end_of_the_feed_names_where_to_resume_and_later_changes_follow(
    api: Api, employer: Any
) -> None:
    """C10: `next` is never null; resumed later, it gives exactly what changed since, and a
    job changed during a walk comes again, in its new state."""
    a, b, c = (create_job(api, employer, title=t) for t in ("A", "B", "C"))
    seen, resume = walk(api, employer, feed(api, employer, pageSize=2))
    assert ids(seen) == [a["id"], b["id"], c["id"]]
    empty = follow(api, employer, resume)
    assert empty["data"] == [] and empty["paging"]["next"] == resume  # nothing new: stays
    api.put(f"{JOBS}/{a['id']}", key=employer.key, json={"title": "A2"})
    d = create_job(api, employer, title="D")
    later, _ = walk(api, employer, follow(api, employer, resume))
    assert [(j["id"], j["title"]) for j in later] == [(a["id"], "A2"), (d["id"], "D")]


def test_a_job_changed_during_a_walk_reappears_later_in_it(api: Api, employer: Any) -> None:
    made = [create_job(api, employer) for _ in range(4)]
    first = feed(api, employer, pageSize=2)
    assert ids(first["data"]) == ids(made[:2])
    api.put(f"{JOBS}/{made[0]['id']}", key=employer.key, json={"title": "Again"})
    rest, _ = walk(api, employer, follow(api, employer, first["paging"]["next"]))
    assert ids(rest) == [made[2]["id"], made[3]["id"], made[0]["id"]]


def test_the_lag_holds_back_changes_until_they_are_old_enough(
    api: Api, employer: Any, present: Present
) -> None:
    """C10: a change shows only once CHANGE_FEED_LAG_SECONDS (5) old, so a walk never passes
    a time at which a change can still commit; the resume point waits for it."""
    present.ahead = 0.0
    job = create_job(api, employer)
    held = feed(api, employer)
    assert held["data"] == []
    present.ahead = 4.0  # still within the lag
    assert follow(api, employer, held["paging"]["next"])["data"] == []
    present.ahead = 5.5
    shown = follow(api, employer, held["paging"]["next"])
    assert ids(shown["data"]) == [job["id"]]


def test_updated_since_starts_the_walk_at_that_instant(api: Api, employer: Any) -> None:
    """C10: jobs changed at or after updatedSince; the cursor then holds the position, so
    updatedSince is not carried in `next`."""
    old = create_job(api, employer)
    new = create_job(api, employer)
    since = new["updatedAt"]  # truncated to the millisecond: at or before the change
    body = feed(api, employer, updatedSince=since)
    same_millisecond = old["updatedAt"] == since
    assert ids(body["data"]) == ([old["id"]] if same_millisecond else []) + [new["id"]]
    assert "updatedSince" not in dict(query_of(body["paging"]["next"]))
    later = datetime.strptime(since, "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(seconds=1)
    offset = later.replace(tzinfo=UTC).astimezone().isoformat()  # another offset, same instant
    assert feed(api, employer, updatedSince=offset)["data"] == []
    everything = feed(api, employer, updatedSince="2000-01-01T00:00:00+05:00")
    assert ids(everything["data"]) == [old["id"], new["id"]]


def test_the_feed_keeps_q_and_status_and_carries_them_first(api: Api, employer: Any) -> None:
    """C10: `next` carries q and status (when supplied), then sort, pageSize and cursor."""
    bakers = [create_job(api, employer, title=f"Baker {i}", status="active") for i in range(3)]
    create_job(api, employer, title="Baker draft")
    create_job(api, employer, title="Cook", status="active")
    first = feed(api, employer, q="BAKER", status="active", pageSize=2)
    keys = [k for k, _v in query_of(first["paging"]["next"])]
    assert keys == ["q", "status", "sort", "pageSize", "cursor"]
    seen, _ = walk(api, employer, first)
    assert ids(seen) == ids(bakers)


def test_another_employers_jobs_and_cursors_are_not_this_feed(
    api: Api, employer: Any, make_employer: Any
) -> None:
    """C2 and C10: a feed holds the key's employer's jobs only; another employer's cursor, or
    the applications feed's, is 400 invalid_query."""
    other = make_employer("Other Co")
    mine = create_job(api, employer)
    create_job(api, other)
    body = feed(api, employer)
    assert ids(body["data"]) == [mine["id"]]
    cursor = dict(query_of(body["paging"]["next"]))["cursor"]
    result = api.get(JOBS, key=other.key, params={"sort": "updatedAt", "cursor": cursor})
    assert entries(result, 400, "invalid_query") == [("cursor", "invalid_format")]
    on_applications = api.get(
        APPLICATIONS, key=employer.key, params={"sort": "receivedAt", "cursor": cursor}
    )
    assert entries(on_applications, 400, "invalid_query") == [("cursor", "invalid_format")]


def _tampered(cursor: str) -> list[str]:
    """The cursor cut short, with a character changed, and re-encoded with its position
    moved but its checksum kept."""
    text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    kind, employer, micros, job_id, checksum = text.split(".")
    moved = f"{kind}.{employer}.{int(micros) - 1}.{job_id}.{checksum}"
    # A middle character: the last one may carry only padding bits, which decode the same.
    middle = len(cursor) // 2
    flipped = cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]
    return [
        cursor[:-3],
        flipped,
        base64.urlsafe_b64encode(moved.encode()).decode().rstrip("="),
        "not a cursor",
        "%%%",
    ]


def test_a_tampered_or_malformed_cursor_is_400(api: Api, employer: Any) -> None:
    create_job(api, employer)
    cursor = dict(query_of(feed(api, employer)["paging"]["next"]))["cursor"]
    for bad in _tampered(cursor):
        result = api.get(JOBS, key=employer.key, params={"sort": "updatedAt", "cursor": bad})
        assert entries(result, 400, "invalid_query") == [("cursor", "invalid_format")], bad


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"sort": "updatedAt", "page": "2"}, [("page", "out_of_range")]),
        ({"sort": "updatedAt", "page": "abc"}, [("page", "out_of_range")]),
        ({"sort": "publishDate"}, [("sort", "out_of_range")]),
        ({"sort": "updatedat"}, [("sort", "out_of_range")]),
        ({"sort": "updatedAt", "updatedSince": "2026-11-25"}, [("updatedSince", "invalid_format")]),
        ({"updatedSince": "2026-11-25T15:05:09"}, [("updatedSince", "invalid_format")]),
        ({"updatedSince": "2026-02-30T00:00:00Z"}, [("updatedSince", "invalid_format")]),
        ({"updatedSince": "9999-12-31T23:59:59-01:00"}, [("updatedSince", "invalid_format")]),
        ({"updatedSince": "yesterday"}, [("updatedSince", "invalid_format")]),
        (
            {"sort": "updatedAt", "page": "1", "pageSize": "0", "updatedSince": "x"},
            [
                ("page", "out_of_range"),
                ("pageSize", "out_of_range"),
                ("updatedSince", "invalid_format"),
            ],
        ),
    ],
)
def test_every_bad_feed_parameter_is_400_naming_it(
    api: Api, employer: Any, params: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    """C10 and C1: page with sort, another sort, a malformed updatedSince: 400 invalid_query
    with an entry for each parameter."""
    result = api.get(JOBS, key=employer.key, params=params)
    assert sorted(entries(result, 400, "invalid_query")) == expected


def test_an_unencoded_plus_in_an_offset_is_read_as_plus(api: Api, employer: Any) -> None:
    job = create_job(api, employer)
    result = api.get(JOBS, key=employer.key, query_string="updatedSince=2000-01-01T00:00:00+05:00")
    assert result.status_code == 200 and ids(result.json["data"]) == [job["id"]]


# --- updatedSince without sort ----------------------------------------------------------


def test_updated_since_filters_the_paged_list_with_an_exact_total(api: Api, employer: Any) -> None:
    """C10: without sort, updatedSince keeps jobs changed at or after it; C6's order and
    paging stand, and the total counts only those (not the employer's tally, nor the total
    of the same search kept without the filter)."""
    old = [create_job(api, employer, title=f"Baker {i}", status="active") for i in range(3)]
    cut = create_job(api, employer, title="Baker cut", status="active")
    since = cut["updatedAt"]
    api.put(f"{JOBS}/{old[0]['id']}", key=employer.key, json={"title": "Baker again"})
    assert api.get(JOBS, key=employer.key, params={"q": "baker"}).json["paging"]["total"] == 4
    for params in ({}, {"q": "baker"}, {"status": "active"}, {"q": "bak", "status": "active"}):
        body = api.get(
            JOBS, key=employer.key, params={**params, "updatedSince": since, "pageSize": 1}
        ).json
        assert body["paging"]["total"] == 2, params
        assert body["paging"]["pages"] == 2
        second = follow(api, employer, body["paging"]["next"])
        assert {*ids(body["data"]), *ids(second["data"])} == {cut["id"], old[0]["id"]}
    past = api.get(JOBS, key=employer.key, params={"updatedSince": since, "page": 5}).json
    assert past["data"] == [] and past["paging"]["total"] == 2
    none = api.get(JOBS, key=employer.key, params={"q": "zzz", "updatedSince": since}).json
    assert none["paging"]["total"] == 0


def test_paging_links_carry_updated_since_after_q_and_status(api: Api, employer: Any) -> None:
    """C10: q, status, updatedSince (as sent), then pageSize and page."""
    for i in range(3):
        create_job(api, employer, title=f"Baker {i}", status="active")
    since = "2000-01-01T00:00:00.000Z"
    body = api.get(
        JOBS,
        key=employer.key,
        params={"updatedSince": since, "status": "active", "q": "baker", "pageSize": 1, "page": 2},
    ).json
    expected = [("q", "baker"), ("status", "active"), ("updatedSince", since), ("pageSize", "1")]
    assert query_of(body["paging"]["next"]) == [*expected, ("page", "3")]
    assert query_of(body["paging"]["previous"]) == [*expected, ("page", "1")]


# --- applications ------------------------------------------------------------------------


def _apply(api: Api, job_id: int, name: str = "Ada Lovelace") -> int:
    result = api.post(
        f"{JOBS}/{job_id}/applications", json={"name": name, "email": "ada@example.org"}
    )
    assert result.status_code == 202, result.text
    application_id: int = result.json["id"]
    return application_id


def test_the_applications_feed_walks_by_received_at(api: Api, employer: Any) -> None:
    """C10: GET /applications?sort=receivedAt and a job's own, by (receivedAt, id), with a
    cursor; later applications come after the resume point."""
    job = create_job(api, employer, status="active")
    other = create_job(api, employer, status="active")
    made = [_apply(api, job["id"]), _apply(api, other["id"]), _apply(api, job["id"])]
    first = feed(api, employer, APPLICATIONS, pageSize=2)
    assert [k for k, _v in query_of(first["paging"]["next"])] == ["sort", "pageSize", "cursor"]
    seen, resume = walk(api, employer, first)
    assert ids(seen) == made
    assert all(STAMP.fullmatch(a["receivedAt"]) for a in seen)
    of_job = feed(api, employer, f"{JOBS}/{job['id']}/applications")
    assert ids(of_job["data"]) == [made[0], made[2]]
    assert urlsplit(of_job["paging"]["next"]).path == f"{JOBS}/{job['id']}/applications"
    filtered = feed(api, employer, APPLICATIONS, jobId=other["id"], status="pending")
    assert ids(filtered["data"]) == [made[1]]
    keys = [k for k, _v in query_of(filtered["paging"]["next"])]
    assert keys == ["status", "jobId", "sort", "pageSize", "cursor"]
    later = _apply(api, other["id"])
    assert ids(follow(api, employer, resume)["data"]) == [later]


def test_the_applications_feed_has_the_lag_and_its_own_cursors(
    api: Api, employer: Any, make_employer: Any, present: Present
) -> None:
    job = create_job(api, employer, status="active")
    present.ahead = 0.0
    made = _apply(api, job["id"])
    held = feed(api, employer, APPLICATIONS)
    assert held["data"] == []
    present.ahead = 6.0
    assert ids(follow(api, employer, held["paging"]["next"])["data"]) == [made]
    cursor = dict(query_of(held["paging"]["next"]))["cursor"]
    other = make_employer("Other Co")
    for account, path, sort in (
        (other, APPLICATIONS, "receivedAt"),
        (employer, JOBS, "updatedAt"),
    ):
        result = api.get(path, key=account.key, params={"sort": sort, "cursor": cursor})
        assert entries(result, 400, "invalid_query") == [("cursor", "invalid_format")]
    bad = api.get(
        f"{JOBS}/{job['id']}/applications",
        key=employer.key,
        params={"sort": "receivedAt", "page": "1", "receivedSince": "now"},
    )
    assert sorted(entries(bad, 400, "invalid_query")) == [
        ("page", "out_of_range"),
        ("receivedSince", "invalid_format"),
    ]
    wrong = api.get(APPLICATIONS, key=employer.key, params={"sort": "updatedAt"})
    assert entries(wrong, 400, "invalid_query") == [("sort", "out_of_range")]


def test_received_since_filters_the_paged_applications(api: Api, employer: Any) -> None:
    """C10: without sort, receivedSince filters (at or after), counted exactly, and the
    links carry status, jobId, receivedSince, then pageSize and page."""
    job = create_job(api, employer, status="active")
    _apply(api, job["id"])
    kept = [_apply(api, job["id"]) for _ in range(2)]
    since = api.get(f"{APPLICATIONS}/{kept[0]}", key=employer.key).json["receivedAt"]
    body = api.get(
        APPLICATIONS,
        key=employer.key,
        params={"receivedSince": since, "jobId": job["id"], "status": "pending", "pageSize": 1},
    ).json
    assert body["paging"]["total"] == 2 and ids(body["data"]) == [kept[1]]
    assert [k for k, _v in query_of(body["paging"]["next"])] == [
        "status",
        "jobId",
        "receivedSince",
        "pageSize",
        "page",
    ]
    of_job = api.get(
        f"{JOBS}/{job['id']}/applications", key=employer.key, params={"receivedSince": since}
    ).json
    assert of_job["paging"]["total"] == 2 and ids(of_job["data"]) == kept[::-1]


def test_a_job_write_answers_unstamped_values_the_feed_shows(api: Api, employer: Any) -> None:
    """The feed's headers show the job as a GET of it does (the header's members)."""
    job = create_job(api, employer, referenceId="H-1")
    (header,) = feed(api, employer)["data"]
    assert header == {k: job[k] for k in header}
    assert set(unstamped(header)) | {"updatedAt"} == set(header)
