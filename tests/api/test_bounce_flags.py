"""C22 through the API: an address that hard-bounced three times is flagged for its employer
alone; its jobs answer `application_email_undeliverable` on GET (outside the ETag) and on
every write, and GET /employer lists it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from models.applications import bounces
from models.core.dates import utcnow
from models.db.entities import OutboxEntry
from tests.api.applying import API, apply, received
from tests.conftest import Account, Api
from tests.factories import JOBS, job_body, problem
from tests.models.applications.test_bounces import FAILED, dsn

EMPLOYER = f"{API}/employer"


def bounce_back(sessions: sessionmaker[Session], app_id: int, address: str) -> bounces.Taken:
    """The copy sent, then a DSN saying `address` does not exist."""
    [notice] = bounces.notices(dsn(FAILED.replace("jobs@upkeep.test", address)))
    with sessions() as s:
        sent = update(OutboxEntry).where(OutboxEntry.application_id == app_id)
        s.execute(sent.values(status="sent", sent_at=utcnow()))
        taken = bounces.take(s, app_id, notice, now=utcnow())
        s.commit()
    return taken


def warning_codes(answer: Any) -> list[tuple[str, str]]:
    return [(w["field"], w["code"]) for w in answer.json.get("warnings", [])]


def test_the_third_hard_bounce_flags_the_address_on_its_jobs_and_the_employer(
    api: Api, employer: Account, make_employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = api.post(JOBS, json=job_body(status="active"), key=employer.key).json
    other = make_employer("Birch Ltd")
    theirs = api.post(JOBS, json=job_body(status="active"), key=other.key).json
    path = f"{JOBS}/{job['id']}"
    before = api.get(path, key=employer.key)
    for _ in range(3):
        assert "warnings" not in api.get(path, key=employer.key).json
        taken = bounce_back(sessions, received(apply(api, job["id"])), "JOBS@maple.test")
        assert taken.undeliverable  # no endpoint: no event written
    flagged = ("applicationEmail", "application_email_undeliverable")
    read = api.get(path, key=employer.key)
    assert warning_codes(read) == [flagged]
    assert "jobs@maple.test" in read.json["warnings"][0]["message"]
    assert read.headers["ETag"] == before.headers["ETag"]
    assert {k: v for k, v in read.json.items() if k != "warnings"} == before.json
    assert (
        api.get(path, key=employer.key, headers={"If-None-Match": read.headers["ETag"]}).status_code
        == 304
    )
    assert flagged in warning_codes(api.put(path, json={"title": "Baker"}, key=employer.key))
    assert warning_codes(api.get(path, key=employer.key)) == [flagged]  # a new version, read whole
    written_back = api.put(path, json=read.json, key=employer.key)
    assert written_back.status_code == 200 and flagged in warning_codes(written_back)
    moved = api.put(path, json={"applicationEmail": "hiring@maple.test"}, key=employer.key)
    assert flagged not in warning_codes(moved)
    assert "warnings" not in api.get(path, key=employer.key).json
    [shown] = api.get(EMPLOYER, key=employer.key).json["flaggedAddresses"]
    assert (shown["address"], shown["hardBounces"], shown["reason"]) == (
        "jobs@maple.test",
        3,
        "mailbox_unknown",
    )
    # The other employer's job at the same address is not theirs to be warned of.
    assert "warnings" not in api.get(f"{JOBS}/{theirs['id']}", key=other.key).json
    assert api.get(EMPLOYER, key=other.key).json["flaggedAddresses"] == []


def test_an_undeliverable_application_shows_its_bounce(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = api.post(JOBS, json=job_body(status="active"), key=employer.key).json
    app_id = received(apply(api, job["id"]))
    bounce_back(sessions, app_id, "jobs@maple.test")
    shown = api.get(f"{API}/applications/{app_id}", key=employer.key).json
    assert shown["status"] == "undeliverable"
    assert shown["bounce"]["reason"] == "mailbox_unknown" and shown["bounce"]["source"] == "dsn"
    listed = api.get(f"{API}/jobs/{job['id']}/applications", key=employer.key).json["data"]
    assert [a["status"] for a in listed] == ["undeliverable"]


def test_the_notification_address_is_a_setting_checked_and_cleared(
    api: Api, employer: Account
) -> None:
    def put(value: Any) -> Any:
        return api.put(EMPLOYER, json={"notificationEmail": value}, key=employer.key)

    assert put(" ops@maple.test ").json["notificationEmail"] == "ops@maple.test"
    for bad, code in (("not an address", "invalid_format"), (7, "invalid_type")):
        refused = put(bad)
        assert refused.status_code == 422
        [error] = refused.json["errors"]
        assert (error["field"], error["code"]) == ("notificationEmail", code)
    assert api.get(EMPLOYER, key=employer.key).json["notificationEmail"] == "ops@maple.test"
    assert (
        api.put(EMPLOYER, json={"language": "fr"}, key=employer.key).json["notificationEmail"]
        == "ops@maple.test"
    )
    assert put(None).json["notificationEmail"] is None


def test_the_employer_clears_a_flag_and_its_jobs_warn_no_more(
    api: Api, employer: Account, make_employer: Any, sessions: sessionmaker[Session]
) -> None:
    job = api.post(JOBS, json=job_body(status="active"), key=employer.key).json
    for _ in range(3):
        bounce_back(sessions, received(apply(api, job["id"])), "jobs@maple.test")
    path, flagged = f"{JOBS}/{job['id']}", ("applicationEmail", "application_email_undeliverable")
    assert warning_codes(api.get(path, key=employer.key)) == [flagged]
    clear = f"{EMPLOYER}/flagged-addresses/JOBS%40maple.test"
    other = make_employer("Birch Ltd")
    problem(api.delete(clear, key=other.key), 404, "not_found")  # not theirs to clear
    assert api.delete(clear, key=employer.key).status_code == 204
    assert api.get(EMPLOYER, key=employer.key).json["flaggedAddresses"] == []
    assert "warnings" not in api.get(path, key=employer.key).json
    assert flagged not in warning_codes(api.put(path, json={"title": "Baker"}, key=employer.key))
    problem(api.delete(clear, key=employer.key), 404, "not_found")
    # Counted again from nothing: a single new bounce flags nothing.
    bounce_back(sessions, received(apply(api, job["id"])), "jobs@maple.test")
    assert api.get(EMPLOYER, key=employer.key).json["flaggedAddresses"] == []
