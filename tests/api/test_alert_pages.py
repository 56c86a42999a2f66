"""C19 pages of job alerts, in English and French: the sign-up form reached with the feed's
filters, its double opt-in (pending, then confirmed by the link's button), its honeypot and
rate limit bucket, the manage page and the one-click unsubscribe of RFC 8058; a bad link or
a bad search is a page saying so, never a 500."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models.alerts import filters as alert_filters
from models.alerts import subscriptions as alerts
from models.core.dates import utcnow
from models.db.entities import AlertMail, AlertSubscription
from models.jobs.feeds import Filters
from tests.api.test_pages import APPLICANT, active_job, assert_html, multipart, pages
from tests.conftest import Api, Clock

SIGN_UP = {"email": "ada@example.com", "frequency": "weekly", "website": ""}


def subscriptions(sessions: sessionmaker[Session]) -> list[AlertSubscription]:
    with sessions() as s:
        return list(s.scalars(select(AlertSubscription).order_by(AlertSubscription.id)))


def link_token(sessions: sessionmaker[Session]) -> str:
    """A confirmation link's token, as the confirmation email carries one (C19)."""
    with sessions() as s:
        made = alerts.sign_up(s, "ada@example.com", "daily", "fr", Filters(q="cook"), now=utcnow())
        s.commit()
        return made.confirm_token


@pytest.mark.parametrize(
    ("lang", "heading"),
    [("en", "Get job alerts by email"), ("fr", "Recevoir les offres par courriel")],
)
def test_the_form_names_the_search_it_was_reached_with(
    app: WsgiApp, lang: str, heading: str
) -> None:
    page = assert_html(
        pages(app).simulate_get("/alerts/new", query_string=f"q=cook&province=QC&lang={lang}"),
        200,
    )
    assert heading in page
    cook = "“cook”" if lang == "en" else "«\u00a0cook\u00a0»"
    assert cook in page and ("Quebec" in page or "Québec" in page)
    assert f'action="/alerts/new?q=cook&amp;province=QC&amp;lang={lang}"' in page
    assert 'name="website"' in page  # the honeypot


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("province=XX&category=abc", "Choose a category from the list. Choose a province"),
        ("place=999999", "This place is not one of the listed locations."),
        ("positionType=9&lang=fr", "Choisissez un type de poste dans la liste."),
        ("minPay=lots", "Enter the minimum pay as whole dollars a year"),
        ("days=0", "Enter a number of days from 1 to 365."),
        ("workplaceType=office", "Choose on site, hybrid or remote."),
    ],
)
def test_a_search_the_search_page_refuses_is_a_400_page_naming_the_filter(
    app: WsgiApp, sessions: sessionmaker[Session], query: str, said: str
) -> None:
    for method in ("GET", "POST"):
        result = pages(app).simulate_request(
            method, "/alerts/new", query_string=query, **multipart(SIGN_UP)
        )
        page = assert_html(result, 400)
        assert "could not be read" in page or "n’a pas pu être lue" in page
        assert said in page
    assert subscriptions(sessions) == []


def test_every_filter_of_the_search_page_reaches_the_alert(
    app: WsgiApp, sessions: sessionmaker[Session], api: Api, employer: Any
) -> None:
    """A search page's address with /jobs replaced by /alerts/new signs up to that search."""
    place = active_job(api, employer)["locations"][0]["id"]
    query = (
        f"q=cook&category=12&province=ON&place={place}&positionType=1"
        "&workplaceType=hybrid&minPay=50000&days=7&sort=closing&lang=de"
    )
    assert_html(pages(app).simulate_get("/alerts/new", query_string=query), 200)
    result = pages(app).simulate_post("/alerts/new", query_string=query, **multipart(SIGN_UP))
    assert result.status_code == 303
    [alert] = subscriptions(sessions)
    assert alert_filters.from_query(alert.filters) == Filters(
        q="cook",
        category=12,
        province="ON",
        place=place,
        position_type=1,
        workplace_type="hybrid",
        min_pay=50000,
        days=7,
    )


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        (
            "en",
            "“cook” · Ontario · Toronto, ON · Remote · at least $50,000 a year"
            " · posted in the last 7 days",
        ),
        (
            "fr",
            "«\u00a0cook\u00a0» · Ontario · Toronto, ON · Télétravail"
            " · au moins 50\u00a0000\u00a0$ par année · publiées depuis 7 jours",
        ),
    ],
)
def test_the_form_and_the_manage_page_say_the_search_in_words(
    app: WsgiApp, sessions: sessionmaker[Session], api: Api, employer: Any, lang: str, words: str
) -> None:
    place = active_job(api, employer)["locations"][0]["id"]
    query = f"q=cook&province=ON&place={place}&workplaceType=remote&minPay=50000&days=7"
    form = pages(app).simulate_get("/alerts/new", query_string=f"{query}&lang={lang}")
    assert f"<strong>{words}</strong>" in assert_html(form, 200)
    with sessions() as s:
        search = alert_filters.from_query(query)
        made = alerts.sign_up(s, "ada@example.com", "daily", lang, search, now=utcnow())
        s.commit()
    done = pages(app).simulate_post(
        f"/alerts/confirm/{made.confirm_token}", query_string=f"lang={lang}"
    )
    path, manage_query = done.headers["location"].split("?", 1)
    page = pages(app).simulate_get(path, query_string=manage_query)
    assert f"<strong>{words}</strong>" in assert_html(page, 200)


def test_signing_up_stores_a_pending_alert_and_asks_for_its_confirmation(
    settings: Any, sessions: sessionmaker[Session], clock: Clock
) -> None:
    sent: list[int] = []
    app = create_app(settings, sessions, Collaborators(enqueue_alert_mail=sent.append), today=clock)
    result = pages(app).simulate_post(
        "/alerts/new", query_string="q=line+cook&lang=fr", **multipart(SIGN_UP)
    )
    assert result.status_code == 303
    assert result.headers["location"] == "/alerts/sent?lang=fr"
    [alert] = subscriptions(sessions)
    assert (alert.email, alert.frequency, alert.language) == ("ada@example.com", "weekly", "fr")
    assert (alert.state, alert.filters) == ("pending", "q=line+cook")
    with sessions() as s:
        [mail] = s.scalars(select(AlertMail)).all()
    assert (mail.subscription_id, mail.kind, mail.status) == (alert.id, "confirm", "pending")
    assert sent == [mail.id]  # its confirmation email, enqueued once committed
    page = assert_html(pages(app).simulate_get("/alerts/sent", query_string="lang=fr"), 200)
    assert "Vérifiez vos courriels" in page


def test_a_bad_address_is_the_form_again_with_its_message(
    app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    body = {**SIGN_UP, "email": "ada@", "frequency": "hourly"}
    result = pages(app).simulate_post("/alerts/new", query_string="q=cook", **multipart(body))
    page = assert_html(result, 422)
    assert "Please enter a valid email address" in page and "daily or weekly" in page
    assert 'value="ada@"' in page
    assert subscriptions(sessions) == []


def test_a_filled_honeypot_gets_the_same_303_and_nothing_is_stored(
    app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    body = {**SIGN_UP, "website": "https://spam.example"}
    result = pages(app).simulate_post("/alerts/new", **multipart(body))
    assert (result.status_code, result.headers["location"]) == (303, "/alerts/sent?lang=en")
    assert subscriptions(sessions) == []


def test_an_unreadable_form_is_a_400_page(app: WsgiApp) -> None:
    result = pages(app).simulate_post(
        "/alerts/new", body=b"x", headers={"Content-Type": "multipart/form-data"}
    )
    assert_html(result, 400)


def test_a_flood_of_sign_ups_is_a_429_page_in_the_alerts_own_bucket(
    settings: Any, sessions: sessionmaker[Session], clock: Clock, make_employer: Any
) -> None:
    limiter = ratelimit.MemoryLimiter(2, 60)
    app = create_app(settings, sessions, Collaborators(limiter=limiter), today=clock)
    for n in range(2):
        body = {**SIGN_UP, "email": f"a{n}@example.com"}
        assert pages(app).simulate_post("/alerts/new", **multipart(body)).status_code == 303
    flooded = pages(app).simulate_post("/alerts/new", query_string="lang=fr", **multipart(SIGN_UP))
    page = assert_html(flooded, 429)
    assert int(flooded.headers["retry-after"]) >= 1
    assert "Trop de demandes" in page
    assert len(subscriptions(sessions)) == 2
    api, employer = Api(app), make_employer()
    job = active_job(api, employer)
    applied = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(APPLICANT))
    assert applied.status_code == 303  # alerts did not use up the applications


def test_the_link_shows_a_button_and_its_post_confirms_then_the_manage_page(
    app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    token = link_token(sessions)
    button = pages(app).simulate_get(f"/alerts/confirm/{token}")
    shown = assert_html(button, 200)
    assert f'action="/alerts/confirm/{token}?lang=en"' in shown
    assert button.headers["cache-control"] == "no-store"
    assert subscriptions(sessions)[0].state == "pending"  # a scanner's GET confirms nothing
    done = pages(app).simulate_post(f"/alerts/confirm/{token}", query_string="lang=fr")
    assert done.status_code == 303
    [alert] = subscriptions(sessions)
    assert alert.state == "confirmed" and alert.last_sent_at is not None
    manage = done.headers["location"]
    match = re.fullmatch(r"/alerts/manage/([\w-]+)\?lang=fr&saved=confirmed", manage)
    assert match is not None
    path, query = manage.split("?", 1)
    page = assert_html(pages(app).simulate_get(path, query_string=query), 200)
    assert "Votre alerte" in page and "«\u00a0cook\u00a0»" in page and "ada@example.com" in page
    again = pages(app).simulate_post(f"/alerts/confirm/{token}")  # spent
    assert "This link does not work" in assert_html(again, 404)


def test_the_manage_page_changes_the_frequency(
    app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    token = link_token(sessions)
    done = pages(app).simulate_post(f"/alerts/confirm/{token}")
    path = done.headers["location"].split("?", 1)[0]
    saved = pages(app).simulate_post(path, **multipart({"frequency": "weekly"}))
    assert saved.status_code == 303 and saved.headers["location"].endswith("&saved=1")
    assert subscriptions(sessions)[0].frequency == "weekly"
    refused = pages(app).simulate_post(path, **multipart({"frequency": "hourly"}))
    assert "daily or weekly" in assert_html(refused, 422)
    assert subscriptions(sessions)[0].frequency == "weekly"
    unreadable = pages(app).simulate_post(
        path, body=b"x", headers={"Content-Type": "multipart/form-data"}
    )
    assert "The form could not be read" in assert_html(unreadable, 400)
    assert unreadable.headers["cache-control"] == "no-store"


def test_one_click_unsubscribe_is_a_post_with_no_confirmation(
    app: WsgiApp, sessions: sessionmaker[Session]
) -> None:
    """RFC 8058: a mail client POSTs `List-Unsubscribe=One-Click` to the header's URL."""
    token = link_token(sessions)
    done = pages(app).simulate_post(f"/alerts/confirm/{token}")
    manage = done.headers["location"].split("?", 1)[0].rsplit("/", 1)[1]
    url = f"/alerts/unsubscribe/{manage}"
    shown = assert_html(pages(app).simulate_get(url), 200)
    assert subscriptions(sessions)[0].state == "confirmed"  # the GET shows a button only
    assert f'action="{url}?lang=en"' in shown
    one_click = pages(app).simulate_post(
        url,
        body="List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert "You are unsubscribed" in assert_html(one_click, 200)
    assert subscriptions(sessions)[0].state == "unsubscribed"
    assert_html(pages(app).simulate_post(url), 200)  # again: the same answer
    page = assert_html(pages(app).simulate_get(f"/alerts/manage/{manage}"), 200)
    assert "This alert is unsubscribed" in page


@pytest.mark.parametrize(
    "path", ["/alerts/confirm/nope", "/alerts/manage/nope", "/alerts/unsubscribe/nope"]
)
def test_an_unknown_link_is_a_404_page_for_get_and_post(app: WsgiApp, path: str) -> None:
    for method in ("GET", "POST"):
        if (method, path) == ("GET", "/alerts/confirm/nope"):
            continue  # the button page: the token is checked by its POST
        result = pages(app).simulate_request(method, path, **multipart({"frequency": "daily"}))
        page = assert_html(result, 404)
        assert "This link does not work" in page
        assert result.headers["cache-control"] == "no-store"
