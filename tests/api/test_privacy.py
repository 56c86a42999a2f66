"""C13 Privacy: the form's notice, and `DELETE /api/v1.1/applications/{id}` reaching every
copy of an application (résumé, email copy, Idempotency-Key record, `application.received`
payloads and deliveries), mid-send included. Both backends."""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from api import html_render, ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.applications import outbox
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import (
    Application,
    IdempotencyKey,
    OutboxEntry,
    Resume,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookMessage,
)
from models.webhooks import delivery as webhook_delivery
from tests.api.test_pages import multipart
from tests.conftest import Account, Api, CheckedClient
from tests.factories import create_job
from workers import delivery

API = "/api/v1.1"
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"


def _later() -> datetime:
    return utcnow() + timedelta(seconds=60)  # the feed's present, past its lag


@pytest.fixture
def app(settings: Settings, sessions: sessionmaker[Session], clock: Any) -> WsgiApp:
    parts = Collaborators(limiter=ratelimit.Unlimited(), now=_later)
    return create_app(settings, sessions, parts, today=clock)


def endpoint(sessions: sessionmaker[Session], owner: int) -> int:
    with sessions() as s:
        row = WebhookEndpoint(
            employer_id=owner,
            url="https://hooks.example/x",
            events='["application.received"]',  # the applications' events: not the jobs' (C12)
            status="enabled",
            secret="sealed",
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        s.add(row)
        s.commit()
        return row.id


def apply(api: Api, job_id: int, key: str | None = None, **extra: Any) -> int:
    document = {"name": "Ada", "email": "ada@example.com", "phone": "514 555 0199", **extra}
    headers = {"Idempotency-Key": key} if key else {}
    result = api.post(f"{API}/jobs/{job_id}/applications", json=document, headers=headers)
    assert result.status_code == 202, result.text
    assert "Idempotent-Replayed" not in result.headers
    app_id: int = result.json["id"]
    return app_id


def count(sessions: sessionmaker[Session], entity: Any, *where: Any) -> int:
    with sessions() as s:
        return int(s.scalar(select(func.count()).select_from(entity).where(*where)) or 0)


def deliveries(sessions: sessionmaker[Session]) -> dict[int, str]:
    with sessions() as s:
        rows = s.execute(select(WebhookDelivery.endpoint_id, WebhookDelivery.status))
        return {endpoint_id: status for endpoint_id, status in rows}


def payloads(sessions: sessionmaker[Session]) -> list[dict[str, Any]]:
    with sessions() as s:
        return [json.loads(p) for p in s.scalars(select(WebhookMessage.payload))]


# --- the form's notice ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "named", "kept", "policy"),
    [
        ("en", "goes to Maple Corp.", "kept for 180 days", "Privacy policy"),
        ("fr", "est transmis à Maple Corp.", "conservés 180 jours", "Politique de confidentialité"),
    ],
)
def test_the_form_says_what_goes_to_whom_for_how_long_and_links_the_policy(
    api: Api, employer: Account, app: WsgiApp, lang: str, named: str, kept: str, policy: str
) -> None:
    job = create_job(api, employer, status="active")
    page = CheckedClient(app).simulate_get(f"/jobs/{job['id']}", params={"lang": lang}).text
    notice = page[page.index('id="privacy-notice"') : page.index('type="submit"')]
    assert named in notice and kept in notice
    assert f'<a href="/policies/privacy?lang={lang}">{policy}</a>' in notice


@pytest.mark.parametrize(
    ("lang", "phrase"), [("en", "goes to the employer."), ("fr", "est transmis à l’employeur.")]
)
def test_a_confidential_job_s_notice_names_no_employer(
    api: Api, employer: Account, app: WsgiApp, lang: str, phrase: str
) -> None:
    job = create_job(api, employer, status="active", confidential=True)
    page = CheckedClient(app).simulate_get(f"/jobs/{job['id']}", params={"lang": lang}).text
    notice = page[page.index('id="privacy-notice"') : page.index('type="submit"')]
    assert phrase in notice and "Maple Corp" not in notice


def test_the_notice_states_the_retention_setting(
    api: Api,
    employer: Account,
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Any,
) -> None:
    job = create_job(api, employer, status="active")
    one_day = dataclasses.replace(settings, application_retention_days=1)
    app = create_app(one_day, sessions, Collaborators(limiter=ratelimit.Unlimited()), today=clock)
    page = CheckedClient(app).simulate_get(f"/jobs/{job['id']}", params={"lang": "fr"}).text
    assert "conservés 1 jour, puis supprimés" in page
    page = CheckedClient(app).simulate_get(f"/jobs/{job['id']}").text
    assert "kept for 1 day, then deleted" in page


# --- erasure by the employer ------------------------------------------------------------------


def test_erasure_reaches_every_copy_and_leaves_nothing_to_retry(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    first, second = endpoint(sessions, employer.id), endpoint(sessions, employer.id)
    third = endpoint(sessions, employer.id)
    job = create_job(api, employer, status="active")
    resume = {"filename": "cv.pdf", "content": base64.b64encode(PDF).decode()}
    app_id = apply(api, job["id"], key="k-1", resume=resume)
    kept = apply(api, job["id"], key="k-2", email="grace@example.com")
    with sessions() as s:  # one delivery succeeded, one failed, one still pending
        mine = select(WebhookMessage.id).where(WebhookMessage.application_id == app_id)
        for endpoint_id, status in ((first, "succeeded"), (second, "failed")):
            s.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.endpoint_id == endpoint_id,
                    WebhookDelivery.message_pk.in_(mine.scalar_subquery()),
                )
                .values(status=status)
            )
        s.commit()
        message_id = s.scalar(
            select(WebhookMessage.message_id).where(WebhookMessage.application_id == app_id)
        )

    result = api.delete(f"{API}/applications/{app_id}", key=employer.key)
    assert result.status_code == 204 and result.text == ""

    assert api.get(f"{API}/applications/{app_id}", key=employer.key).status_code == 404
    assert api.get(f"{API}/applications/{app_id}/resume", key=employer.key).status_code == 404
    gone = Application.id == app_id
    assert count(sessions, Application, gone) == 0
    assert count(sessions, Resume, Resume.application_id == app_id) == 0
    assert count(sessions, OutboxEntry, OutboxEntry.application_id == app_id) == 0
    assert count(sessions, IdempotencyKey, IdempotencyKey.key == "k-1") == 0
    assert count(sessions, IdempotencyKey, IdempotencyKey.key == "k-2") == 1  # another's
    other, erased = sorted(payloads(sessions), key=lambda m: m["data"].get("erased", False))
    assert other["data"]["id"] == kept and other["data"]["email"] == "grace@example.com"
    assert erased["type"] == "application.received" and erased["timestamp"]
    assert erased["data"] == {"id": app_id, "erased": True}
    with sessions() as s:
        statuses = dict(
            s.execute(
                select(WebhookDelivery.endpoint_id, WebhookDelivery.status)
                .join(WebhookMessage)
                .where(WebhookMessage.application_id == app_id)
            ).all()
        )
    assert statuses == {first: "succeeded", second: "cancelled", third: "cancelled"}
    for endpoint_id in (second, third):  # not even the failed one can be sent again
        retry = f"{API}/webhooks/{endpoint_id}/deliveries/{message_id}/retry"
        answer = api.post(retry, key=employer.key)
        assert answer.status_code == 409 and answer.json["code"] == "delivery_not_failed"
    listed = api.get(f"{API}/applications", key=employer.key).json
    assert [a["id"] for a in listed["data"]] == [kept] and listed["paging"]["total"] == 1

    # The key's record went with it: the same request again is a new application.
    again = apply(api, job["id"], key="k-1", resume=resume)
    assert again != app_id


def test_erasing_twice_an_unknown_or_another_employers_application_is_404(
    api: Api, employer: Account, make_employer: Any, sessions: sessionmaker[Session]
) -> None:
    other = make_employer("Birch Ltd")
    job = create_job(api, employer, status="active")
    app_id = apply(api, job["id"])
    for key, target in ((other.key, app_id), (employer.key, 2_000_000_000)):
        result = api.delete(f"{API}/applications/{target}", key=key)
        assert result.status_code == 404 and result.json["code"] == "not_found"
    assert count(sessions, Application, Application.id == app_id) == 1
    assert api.delete(f"{API}/applications/{app_id}", key=employer.key).status_code == 204
    second = api.delete(f"{API}/applications/{app_id}", key=employer.key)
    assert second.status_code == 404 and second.json["code"] == "not_found"
    assert api.delete(f"{API}/applications/{app_id}").status_code == 401
    assert api.delete(f"{API}/applications/abc", key=employer.key).status_code == 404


def test_erasure_takes_a_json_body_or_none_and_refuses_another_media_type(
    api: Api, employer: Account
) -> None:
    job = create_job(api, employer, status="active")
    app_id = apply(api, job["id"])
    text = {"body": "x", "headers": {"Content-Type": "text/plain"}}
    assert api.delete(f"{API}/applications/{app_id}", key=employer.key, **text).status_code == 415
    overridden = api.post(
        f"{API}/applications/{app_id}",
        key=employer.key,
        headers={"X-HTTP-Method-Override": "DELETE"},
    )
    assert overridden.status_code == 204


def test_the_forms_idempotency_record_is_erased_too(
    api: Api, employer: Account, app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    job = create_job(api, employer, status="active")
    fields = {
        "name": "Élodie Côté",
        "email": "elodie@example.org",
        "website": "",
        html_render.FORM_KEY: "one-time-token-1",
    }
    posted = CheckedClient(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(fields))
    assert posted.status_code == 303
    [app_id] = [a["id"] for a in api.get(f"{API}/applications", key=employer.key).json["data"]]
    assert count(sessions, IdempotencyKey, IdempotencyKey.application_id == app_id) == 1
    assert api.delete(f"{API}/applications/{app_id}", key=employer.key).status_code == 204
    assert count(sessions, IdempotencyKey, IdempotencyKey.key == "one-time-token-1") == 0


def test_an_erased_application_leaves_the_feed_and_the_cursor_past_it_still_works(
    api: Api, employer: Account
) -> None:
    """C10's feed gives no tombstone: an erased application is no longer shown, and a
    cursor that points at it (a position, not a row) resumes after it."""
    job = create_job(api, employer, status="active")
    ids = [apply(api, job["id"], email=f"a{i}@example.com") for i in range(4)]
    feed = f"{API}/applications"
    first = api.get(feed, key=employer.key, params={"sort": "receivedAt", "pageSize": "2"}).json
    assert [a["id"] for a in first["data"]] == ids[:2]
    for erased in (ids[1], ids[2]):  # the page's last, and one the walk has not reached
        assert api.delete(f"{API}/applications/{erased}", key=employer.key).status_code == 204
    parts = urlsplit(first["paging"]["next"])
    rest = api.get(parts.path, key=employer.key, query_string=parts.query).json
    assert [a["id"] for a in rest["data"]] == [ids[3]]
    again = api.get(feed, key=employer.key, params={"sort": "receivedAt"}).json
    assert [a["id"] for a in again["data"]] == [ids[0], ids[3]]


# --- mid-send: a worker holds the copy or the delivery ----------------------------------------


def test_erasing_a_copy_a_worker_has_claimed_lets_the_send_end_and_records_nothing(
    api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    """A send already in flight may finish (C13): the worker read the copy at its claim; its
    mark afterwards finds no entry, and nothing of the application is left or sent again."""
    hook = endpoint(sessions, employer.id)
    job = create_job(api, employer, status="active")
    app_id = apply(api, job["id"])
    timing = outbox.Timing()
    with sessions() as s:  # the workers' own claims, committed as theirs are
        copy = delivery.claim_copy(s, app_id, now=utcnow(), timing=timing)
        [pk] = s.scalars(select(WebhookDelivery.id).where(WebhookDelivery.endpoint_id == hook))
        sending = webhook_delivery.claim(s, pk, now=utcnow(), timing=webhook_delivery.Timing())
        s.commit()
    assert copy is not None and copy.email == "ada@example.com"  # what the worker sends
    assert sending is not None and b"ada@example.com" in sending.payload.encode()

    assert api.delete(f"{API}/applications/{app_id}", key=employer.key).status_code == 204
    assert deliveries(sessions) == {hook: "cancelled"}

    with sessions() as s:  # the sends end: their outcomes change no row
        assert not outbox.mark_sent(s, app_id, now=utcnow(), lease=copy.lease_until)
        assert not webhook_delivery.mark_succeeded(s, sending, status_code=200, now=utcnow())
        s.commit()
        assert outbox.sweep(s, now=utcnow() + timedelta(days=1), timing=timing) == []
        later = utcnow() + timedelta(days=1)
        assert webhook_delivery.sweep(s, now=later, timing=webhook_delivery.Timing()) == []
        s.commit()
    assert deliveries(sessions) == {hook: "cancelled"}
    assert count(sessions, OutboxEntry) == 0 and count(sessions, Application) == 0
    with sessions() as s:  # a task that arrives late finds nothing to claim
        assert delivery.claim_copy(s, app_id, now=later, timing=timing) is None
