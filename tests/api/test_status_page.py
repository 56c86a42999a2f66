"""C20: the application's private status page, the link of its receipt: received,
delivered, accepted by the employer's system, undeliverable with what to do, and erased by
the applicant after a confirmation step; EN and FR, never kept by a cache, never indexed.
Both backends; the receipts are sent in-process to a real SMTP server (aiosmtpd)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp
from models.core.dates import utcnow
from models.core.settings import Settings
from models.db.entities import (
    Application,
    OutboxEntry,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookMessage,
)
from tests.api.test_receipts import app as app
from tests.api.test_receipts import applied_and_receipted
from tests.api.test_receipts import mail_settings as mail_settings
from tests.api.test_receipts import queued as queued
from tests.conftest import Account, Api, CheckedClient, SmtpSink
from tests.factories import create_job
from workers import delivery


def status_page(app: WsgiApp, token: str, lang: str | None = None) -> Any:
    params = {"lang": lang} if lang else None
    return CheckedClient(app).simulate_get(f"/applications/status/{token}", params=params)


def test_a_confidential_job_s_page_names_no_employer(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    job = create_job(api, employer, status="active", title="Baker", confidential=True)
    _, token = applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    page = status_page(app, token).text
    assert "Baker" in page and "Maple" not in page


@pytest.mark.parametrize(
    ("lang", "received_words", "delivered", "undeliverable", "todo"),
    [
        (
            "en",
            "Received on",
            "Delivered to the employer’s mail server on",
            "Not delivered",
            "What you can do",
        ),
        (
            "fr",
            "Reçue le",
            "Remise au serveur de courriel de l’employeur le",
            "Non remise",
            "Ce que vous pouvez faire",
        ),
    ],
)
def test_the_status_page_says_received_then_delivered_or_undeliverable(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
    lang: str,
    received_words: str,
    delivered: str,
    undeliverable: str,
    todo: str,
) -> None:
    job = create_job(api, employer, status="active", title="Baker")
    app_id, token = applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    page = status_page(app, token, lang)
    assert page.status_code == 200
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Robots-Tag"] == "noindex"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Content-Language"] == ("en-CA" if lang == "en" else "fr-CA")
    assert '<meta name="robots" content="noindex">' in page.text
    assert received_words in page.text and delivered not in page.text
    assert "Maple Corp." in page.text and "maple.test" not in page.text
    assert delivery.deliver(sessions, mail_settings, app_id) == "sent"
    page = status_page(app, token, lang)
    assert delivered in page.text and undeliverable not in page.text

    second, other = applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    smtp_sink.reply = "550 5.1.1 no such mailbox"
    assert delivery.deliver(sessions, mail_settings, second) == "undeliverable"
    page = status_page(app, other, lang)
    assert undeliverable in page.text and todo in page.text
    assert f'href="/jobs/{job["id"]}?lang={lang}"' in page.text  # the job is still open


def test_the_status_page_says_accepted_when_the_employer_s_system_took_it(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    with sessions() as s:
        s.add(
            WebhookEndpoint(
                employer_id=employer.id,
                url="https://hooks.example/x",
                events='["*"]',
                status="enabled",
                secret="sealed",
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
        s.commit()
    job = create_job(api, employer, status="active")
    app_id, token = applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    with sessions() as s:
        mine = select(WebhookMessage.id).where(WebhookMessage.application_id == app_id)
        done = s.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.message_pk.in_(mine.scalar_subquery()))
            .values(status="succeeded")
        )
        assert done.rowcount == 1  # type: ignore[attr-defined]
        s.execute(  # the copy gave up: the employer's system has it all the same
            update(OutboxEntry).where(OutboxEntry.application_id == app_id).values(status="failed")
        )
        s.commit()
    page = status_page(app, token).text
    assert "Accepted by the employer’s system." in page and "Not delivered" not in page


def test_an_unknown_token_is_a_404_page_never_kept(app: WsgiApp) -> None:
    page = status_page(app, "not-a-token", "fr")
    assert page.status_code == 404 and "Ce lien ne fonctionne pas" in page.text
    assert page.headers["Cache-Control"] == "no-store"
    posted = CheckedClient(app).simulate_post("/applications/status/nope/erase")
    assert posted.status_code == 404
    confirmed = CheckedClient(app).simulate_post(
        "/applications/status/nope/erase", params={"confirm": "1"}
    )
    assert confirmed.status_code == 404


# --- erasure by the applicant --------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "ask", "erased"),
    [
        ("en", "Erase your application?", "This application was erased"),
        ("fr", "Effacer votre candidature\u00a0?", "Cette candidature a été effacée"),
    ],
)
def test_the_applicant_erases_the_application_after_a_confirmation(
    api: Api,
    employer: Account,
    app: WsgiApp,
    sessions: sessionmaker[Session],
    mail_settings: Settings,
    smtp_sink: SmtpSink,
    lang: str,
    ask: str,
    erased: str,
) -> None:
    job = create_job(api, employer, status="active")
    app_id, token = applied_and_receipted(api, sessions, mail_settings, smtp_sink, job["id"])
    client = CheckedClient(app)
    page = status_page(app, token, lang).text
    action = f"/applications/status/{token}/erase?lang={lang}"
    assert f'<form method="post" action="{action}">' in page
    asked = client.simulate_post(f"/applications/status/{token}/erase", params={"lang": lang})
    assert asked.status_code == 200 and ask in asked.text
    assert asked.headers["Cache-Control"] == "no-store"
    assert f'action="{action}&amp;confirm=1"' in asked.text
    assert api.get(f"/api/v1.1/applications/{app_id}", key=employer.key).status_code == 200

    done = client.simulate_post(
        f"/applications/status/{token}/erase", params={"lang": lang, "confirm": "1"}
    )
    assert done.status_code == 303
    assert done.headers["Location"] == f"/applications/status/{token}?lang={lang}"
    assert api.get(f"/api/v1.1/applications/{app_id}", key=employer.key).status_code == 404
    with sessions() as s:
        assert s.get(Application, app_id) is None
    page = status_page(app, token, lang)
    assert page.status_code == 200 and erased in page.text and "Maple" not in page.text
    assert "<form" not in page.text
    again = client.simulate_post(
        f"/applications/status/{token}/erase", params={"lang": lang, "confirm": "1"}
    )
    assert again.status_code == 303  # erased before: the page says so
    assert client.simulate_post(f"/applications/status/{token}/erase").status_code == 303
