"""C13 pages of fraud reports: the job page's link, statements and policy link; the report
form (GET, POST, 303, errors as 422 pages, honeypot, its own rate bucket); the 410 pages of a
job taken down; the fraud and privacy policy pages. Each in English and French."""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from api import ratelimit
from api.app import Collaborators, WsgiApp, create_app
from models import reports
from models.core.settings import Settings
from models.db.entities import JobReport, ReportMail
from tests.api.test_pages import APPLICANT, active_job, assert_html, multipart, pages
from tests.conftest import Account, Api, Clock
from tests.factories import JOBS, create_job, problem

REPORT = {"reason": "scam", "details": "Asks for a $200 “training fee”.", "email": ""}
AI = {
    True: (
        "This employer uses artificial intelligence to screen, assess or select applicants "
        "for this job.",
        "Cet employeur utilise l’intelligence artificielle pour présélectionner, évaluer ou "
        "sélectionner les personnes candidates à ce poste.",
    ),
    False: (
        "This employer does not use artificial intelligence to screen, assess or select "
        "applicants for this job.",
        "Cet employeur n’utilise pas l’intelligence artificielle pour présélectionner, évaluer "
        "ou sélectionner les personnes candidates à ce poste.",
    ),
}
VACANCY = {
    True: (
        "This posting is for an existing vacancy.",
        "Cette offre vise un poste vacant existant.",
    ),
    False: (
        "This posting is not for an existing vacancy.",
        "Cette offre ne vise pas un poste vacant existant.",
    ),
}


def stored(sessions: sessionmaker[Session]) -> list[JobReport]:
    with sessions() as s:
        return list(s.scalars(select(JobReport).order_by(JobReport.id)))


def take_down(api: Api, sessions: sessionmaker[Session], job_id: int) -> None:
    report_id = api.post(f"{JOBS}/{job_id}/reports", json={"reason": "scam", "details": "x"})
    with sessions() as s:
        reports.resolve(s, report_id.json["id"], take_down=True, note=None)
        s.commit()


def text(page: str) -> str:
    """The page's words, tags dropped and entities decoded."""
    body = page.split("<body>", 1)[-1]
    return html.unescape(re.sub(r"[ \t\r\n]+", " ", re.sub(r"<[^>]+>", " ", body)))


def send(app: WsgiApp, job_id: int, fields: dict[str, str], lang: str = "en", **kw: Any) -> Any:
    return pages(app).simulate_post(f"/jobs/{job_id}/report?lang={lang}", **multipart(fields), **kw)


# --- the job page ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "link", "policy"),
    [
        ("en", "Report this job", "Job fraud policy"),
        ("fr", "Signaler cette offre", "Politique sur les offres d’emploi frauduleuses"),
    ],
)
def test_every_job_page_links_to_the_report_form_and_the_policy(
    app: WsgiApp, api: Api, employer: Account, lang: str, link: str, policy: str
) -> None:
    for routing in (
        {},
        {"applicantRoutingType": {"id": 2}, "applicationUrl": "https://x.example/a"},
    ):
        job = active_job(api, employer, **routing)
        page = assert_html(pages(app).simulate_get(f"/jobs/{job['id']}?lang={lang}"), 200)
        assert f'<a href="/jobs/{job["id"]}/report?lang={lang}">{link}</a>' in page
        assert (
            f'<a href="/policies/job-fraud?lang={lang}">{html.escape(policy, quote=False)}</a>'
            in page
        )


@pytest.mark.parametrize("ai", [True, False])
@pytest.mark.parametrize("vacancy", [True, False])
def test_the_job_page_states_the_ai_and_vacancy_statements_in_its_language(
    app: WsgiApp, api: Api, employer: Account, ai: bool, vacancy: bool
) -> None:
    job = active_job(api, employer, aiScreening=ai, existingVacancy=vacancy)
    for index, lang in enumerate(("en", "fr")):
        words = text(assert_html(pages(app).simulate_get(f"/jobs/{job['id']}?lang={lang}"), 200))
        assert AI[ai][index] in words and VACANCY[vacancy][index] in words
        assert AI[not ai][index] not in words and VACANCY[not vacancy][index] not in words


def test_a_job_that_states_nothing_shows_no_statement(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    job = active_job(api, employer, aiScreening=None, existingVacancy=None)
    for lang in ("en", "fr"):
        page = assert_html(pages(app).simulate_get(f"/jobs/{job['id']}?lang={lang}"), 200)
        assert 'class="statements"' not in page
        assert "intelligence" not in page and "vacan" not in page


def test_a_changed_statement_is_shown_at_once(app: WsgiApp, api: Api, employer: Account) -> None:
    """The kept page (api.cache) follows the job's version: a statement changed shows."""
    job = active_job(api, employer, aiScreening=True)
    assert AI[True][0] in text(pages(app).simulate_get(f"/jobs/{job['id']}").text)
    api.put(f"{JOBS}/{job['id']}", json={"aiScreening": False}, key=employer.key)
    words = text(pages(app).simulate_get(f"/jobs/{job['id']}").text)
    assert AI[False][0] in words and AI[True][0] not in words


# --- the form ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "tag", "words"),
    [
        ("en", "en-CA", ["Reason", "Send report", "Discriminatory"]),
        ("fr", "fr-CA", ["Motif", "Envoyer le signalement", "Discriminatoire"]),
    ],
)
def test_the_report_form_has_its_fields_the_honeypot_and_the_policy_link(
    app: WsgiApp, api: Api, employer: Account, lang: str, tag: str, words: list[str]
) -> None:
    job = active_job(api, employer)
    result = pages(app).simulate_get(f"/jobs/{job['id']}/report?lang={lang}")
    page = assert_html(result, 200)
    assert result.headers["content-language"] == tag and "Accept-Language" in result.headers["vary"]
    assert f'action="/jobs/{job["id"]}/report?lang={lang}"' in page
    for reason in reports.REASONS:
        assert f'name="reason" value="{reason}"' in page
    assert 'name="details"' in page and 'maxlength="2000"' in page
    assert 'name="email"' in page and 'name="website"' in page
    assert f'href="/policies/job-fraud?lang={lang}"' in page
    for word in words:
        assert word in page
    alternates = set(re.findall(r'hreflang="(en|fr)" href="([^"]+)"', page))
    assert alternates == {(c, f"/jobs/{job['id']}/report?lang={c}") for c in ("en", "fr")}


def test_a_report_sent_by_the_form_is_stored_and_answered_303_in_its_language(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    fields = {**REPORT, "details": "Line one\r\nline two", "email": "zoé@exemple.ca"}
    result = send(app, job["id"], fields, "fr")
    assert result.status_code == 303
    assert result.headers["location"] == f"/jobs/{job['id']}/reported?lang=fr"
    [report] = stored(sessions)
    assert (report.job_id, report.reason, report.details) == (
        job["id"],
        "scam",
        "Line one\nline two",
    )
    assert report.email == "zoé@exemple.ca" and report.status == "open"
    thanks = pages(app).simulate_get(result.headers["location"])
    page = assert_html(thanks, 200)
    assert thanks.headers["content-language"] == "fr-CA"
    assert "Nous avons bien reçu votre signalement" in page and "2\u00a0jours" in page
    assert f'href="/jobs/{job["id"]}?lang=fr"' in page


def test_2000_characters_of_details_are_taken_counting_a_line_break_as_one(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    details = "a" * 1000 + "\r\n" + "b" * 999  # 2,000 as the browser counts
    assert send(app, job["id"], {**REPORT, "details": details}).status_code == 303
    assert len(stored(sessions)[0].details) == 2000


@pytest.mark.parametrize(
    ("lang", "summary", "reason", "details", "email"),
    [
        (
            "en",
            "Your report was not sent: 3 fields need fixing below.",
            "Please choose a reason.",
            "Please use at most 2,000 characters.",
            "Please enter a valid email address",
        ),
        (
            "fr",
            "Votre signalement n’a pas été envoyé\u00a0: 3 champs sont à corriger ci-dessous.",
            "Veuillez choisir un motif.",
            "Veuillez utiliser au plus 2\u202f000\u00a0caractères.",
            "Veuillez entrer une adresse courriel valide",
        ),
    ],
)
def test_form_errors_rerender_the_form_as_a_422_with_the_input_and_messages(
    app: WsgiApp,
    api: Api,
    employer: Account,
    sessions: sessionmaker[Session],
    lang: str,
    summary: str,
    reason: str,
    details: str,
    email: str,
) -> None:
    job = active_job(api, employer)
    fields = {"reason": "spam", "details": "<b>x</b>" * 300, "email": "not an address"}
    result = send(app, job["id"], fields, lang)
    page = assert_html(result, 422)
    assert result.headers["cache-control"] == "no-store"
    words = text(page)
    for message in (summary, reason, details, email):
        assert message in words, message
    assert html.escape("<b>x</b>", quote=False) in page and "<b>x</b>" not in page
    assert 'value="not an address"' in page
    assert f'action="/jobs/{job["id"]}/report?lang={lang}"' in page
    assert stored(sessions) == []
    one = send(app, job["id"], {"reason": "other", "details": "  "}, lang)
    assert "1 field needs fixing" in text(assert_html(one, 422)) or "1 champ est" in one.text


def test_a_filled_honeypot_is_the_normal_303_and_nothing_is_stored(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    result = send(app, job["id"], {**REPORT, "website": "https://spam.example"})
    assert result.status_code == 303
    assert result.headers["location"] == f"/jobs/{job['id']}/reported?lang=en"
    assert stored(sessions) == []


def test_a_flood_of_form_reports_is_a_429_page_in_the_reports_own_bucket(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, make_employer: Any
) -> None:
    limiter = ratelimit.MemoryLimiter(2, 60)
    app = create_app(settings, sessions, Collaborators(limiter=limiter), today=clock)
    api, employer = Api(app), make_employer()
    job = active_job(api, employer)
    assert send(app, job["id"], REPORT).status_code == 303
    twin = api.post(f"{JOBS}/{job['id']}/reports", json={"reason": "other", "details": "x"})
    assert twin.status_code == 202  # the form and the twin share one bucket
    flooded = send(app, job["id"], REPORT, "fr")
    page = assert_html(flooded, 429)
    assert int(flooded.headers["retry-after"]) >= 1
    assert "Trop de signalements" in page
    assert len(stored(sessions)) == 2
    applied = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(APPLICANT))
    assert applied.status_code == 303  # reports did not use up the applications


@pytest.mark.parametrize("status", ["draft", "archived"])
def test_the_form_of_a_job_that_is_not_active_is_a_404_page(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session], status: str
) -> None:
    job = create_job(api, employer, status=status)
    for path in (f"/jobs/{job['id']}/report", "/jobs/987654/report", "/jobs/abc/report"):
        assert_html(pages(app).simulate_get(path), 404)
        assert_html(pages(app).simulate_post(path, **multipart(REPORT)), 404)
    assert stored(sessions) == []


def test_a_request_the_form_cannot_read_is_a_page(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    job = active_job(api, employer)
    path = f"/jobs/{job['id']}/report?lang=fr"
    big = pages(app).simulate_post(path, **multipart({**REPORT, "details": "x" * 20000}))
    assert "Signalement trop long" in assert_html(big, 413)
    as_json = pages(app).simulate_post(path, json=REPORT)
    assert_html(as_json, 415)


# --- a job taken down: 410 -------------------------------------------------------------------


def test_a_taken_down_job_is_a_410_page_or_problem_everywhere_the_public_reaches_it(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    take_down(api, sessions, job["id"])
    before = len(stored(sessions))
    for lang, words in (("en", "Job removed"), ("fr", "Offre retirée")):
        for path in (f"/jobs/{job['id']}", f"/jobs/{job['id']}/apply", f"/jobs/{job['id']}/report"):
            result = pages(app).simulate_get(f"{path}?lang={lang}")
            assert words in assert_html(result, 410), path
            assert result.headers["content-language"].startswith(lang)
        posted = pages(app).simulate_post(
            f"/jobs/{job['id']}/apply?lang={lang}", **multipart(APPLICANT)
        )
        assert words in assert_html(posted, 410)
        assert words in assert_html(send(app, job["id"], REPORT, lang), 410)
    problem(api.post(f"{JOBS}/{job['id']}/applications", json=APPLICANT), 410, "gone")
    problem(api.post(f"{JOBS}/{job['id']}/reports", json=REPORT), 410, "gone")
    assert len(stored(sessions)) == before
    assert api.get(f"{JOBS}/{job['id']}/applications", key=employer.key).json["data"] == []


def test_an_archived_job_not_taken_down_stays_a_404(
    app: WsgiApp, api: Api, employer: Account
) -> None:
    job = create_job(api, employer, status="archived")
    assert_html(pages(app).simulate_get(f"/jobs/{job['id']}"), 404)
    problem(api.post(f"{JOBS}/{job['id']}/applications", json=APPLICANT), 404, "not_found")


# --- the policy pages ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/policies/job-fraud", "/policies/privacy"])
def test_the_policy_pages_come_in_both_languages_with_their_headers_and_links(
    app: WsgiApp, path: str
) -> None:
    for query, headers, tag in (
        ("", {}, "en-CA"),
        ("?lang=fr", {}, "fr-CA"),
        ("", {"Accept-Language": "fr-CA,fr;q=0.9,en;q=0.5"}, "fr-CA"),
        ("?lang=en", {"Accept-Language": "fr"}, "en-CA"),
        ("?lang=de", {"Accept-Language": "xx;;q"}, "en-CA"),
    ):
        result = pages(app).simulate_get(path + query, headers=headers)
        page = assert_html(result, 200)
        assert result.headers["content-language"] == tag
        assert "Accept-Language" in result.headers["vary"]
        assert f'<html lang="{tag}">' in page
        alternates = dict(
            re.findall(r'<link rel="alternate" hreflang="(en|fr)" href="([^"]+)">', page)
        )
        assert alternates == {"en": f"{path}?lang=en", "fr": f"{path}?lang=fr"}


def test_the_fraud_policy_says_how_to_report_what_happens_and_within_review_days(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock
) -> None:
    app = create_app(dataclasses.replace(settings, report_review_days=5), sessions, today=clock)
    english = text(assert_html(pages(app).simulate_get("/policies/job-fraud"), 200))
    assert "How to report a job" in english and "What we do" in english
    assert "within 5 days of receiving it" in english
    french = text(assert_html(pages(app).simulate_get("/policies/job-fraud?lang=fr"), 200))
    assert "dans un délai de 5\u00a0jours" in french and "Signaler cette offre" in french
    one = create_app(dataclasses.replace(settings, report_review_days=1), sessions, today=clock)
    assert "within 1 day of receiving it" in text(
        pages(one).simulate_get("/policies/job-fraud").text
    )


def test_the_privacy_policy_names_the_person_in_charge_as_given_or_the_operator(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock
) -> None:
    default = create_app(
        dataclasses.replace(settings, mail_from="Jobs <jobs@example.com>"), sessions, today=clock
    )
    page = text(pages(default).simulate_get("/policies/privacy").text)
    assert "the operator of this service, Jobs <jobs@example.com>" in page
    french = text(pages(default).simulate_get("/policies/privacy?lang=fr").text)
    assert "l’exploitant de ce service, Jobs <jobs@example.com>" in french
    contact = "Zoé Tremblay <b>DPO</b>, vie.privee@example.ca"
    given = dataclasses.replace(settings, privacy_contact=contact, application_retention_days=90)
    app = create_app(given, sessions, today=clock)
    raw = pages(app).simulate_get("/policies/privacy?lang=fr").text
    assert html.escape(contact, quote=False) in raw and "<b>DPO</b>" not in raw
    words = text(raw)
    assert "l’exploitant" not in words and "90\u00a0jours" in words
    english = text(pages(app).simulate_get("/policies/privacy").text)
    assert contact in english and "kept for 90 days" in english
    for topic in ("What we collect and why", "How long we keep it", "Your rights"):
        assert topic in english


def test_an_error_on_a_policy_page_is_a_page(app: WsgiApp) -> None:
    result = pages(app).simulate_post("/policies/privacy?lang=fr")
    assert result.status_code == 405 and result.text.startswith("<!doctype html>")


# --- the operator's email: written with the report, only when REPORTS_EMAIL is set -------------


def mails(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return int(s.scalar(select(func.count()).select_from(ReportMail)) or 0)


def test_the_operators_email_is_written_with_the_report_only_when_reports_email_is_set(
    settings: Settings, sessions: sessionmaker[Session], clock: Clock, make_employer: Any
) -> None:
    quiet = create_app(settings, sessions, today=clock)
    employer = make_employer()
    job = active_job(Api(quiet), employer)
    assert send(quiet, job["id"], REPORT).status_code == 303
    assert mails(sessions) == 0
    queued: list[int] = []
    told = dataclasses.replace(settings, reports_email="trust@example.com")
    app = create_app(told, sessions, Collaborators(enqueue_report=queued.append), today=clock)
    assert send(app, job["id"], REPORT).status_code == 303
    twin = Api(app).post(f"{JOBS}/{job['id']}/reports", json={"reason": "other", "details": "x"})
    assert twin.status_code == 202
    assert mails(sessions) == 2 and queued == [r.id for r in stored(sessions)[1:]]
    assert send(app, job["id"], {"reason": "x", "details": ""}).status_code == 422
    assert mails(sessions) == 2


# --- the form's one-time token (C10), as the application form's -------------------------------


def token_of(page: str) -> str:
    found = re.search(r'<input type="hidden" name="idempotencyKey" value="([^"]+)">', page)
    assert found, "no one-time token in the form"
    return found[1]


def test_a_report_form_sent_twice_stores_one_report_and_answers_the_same_303(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    form = pages(app).simulate_get(f"/jobs/{job['id']}/report?lang=fr")
    token = token_of(form.text)
    assert form.headers["cache-control"] == "private, no-cache"
    assert token != token_of(pages(app).simulate_get(f"/jobs/{job['id']}/report").text)
    fields = {**REPORT, "idempotencyKey": token}
    first = send(app, job["id"], fields, "fr")
    again = send(app, job["id"], fields, "fr")
    assert first.status_code == again.status_code == 303
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert len(stored(sessions)) == 1
    other = send(app, job["id"], {**fields, "details": "Something else."}, "fr")
    assert "Ce formulaire a déjà été envoyé" in text(assert_html(other, 422))
    assert len(stored(sessions)) == 1


def test_a_corrected_form_keeps_its_token_and_reports_once(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    token = token_of(pages(app).simulate_get(f"/jobs/{job['id']}/report").text)
    refused = send(app, job["id"], {"reason": "scam", "details": " ", "idempotencyKey": token})
    assert token_of(assert_html(refused, 422)) == token
    fixed = {**REPORT, "idempotencyKey": token}
    assert send(app, job["id"], fixed).status_code == 303
    assert send(app, job["id"], fixed).headers["idempotent-replayed"] == "true"
    assert len(stored(sessions)) == 1


def test_a_token_that_is_no_key_is_a_400_page(
    app: WsgiApp, api: Api, employer: Account, sessions: sessionmaker[Session]
) -> None:
    job = active_job(api, employer)
    result = send(app, job["id"], {**REPORT, "idempotencyKey": "x" * 256})
    assert "The form could not be read" in assert_html(result, 400)
    assert stored(sessions) == []
