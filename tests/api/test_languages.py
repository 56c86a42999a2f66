"""C13 Languages: a job's language and translation (write, read, symmetry), and the public
pages in English and French: the language chosen, its headers and links, the job's text."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp
from api.languages import from_header
from api.pages import TOKEN_MARK
from models import employers
from models.core.i18n import language
from tests.api.test_pages import APPLICANT, BOUNDARY, active_job, assert_html, multipart, pages
from tests.factories import JOBS, create_job, entries, job_body

FRENCH = {"title": "Boulangère ou boulanger", "description": "<p>Faire du <b>pain</b>.</p>"}
ENGLISH = {"title": "Baker", "description": "<p>Bake <b>bread</b>.</p>"}


# --- the write and read shapes ---------------------------------------------------------------


def test_language_defaults_to_english_and_translation_to_null(api: Any, employer: Any) -> None:
    job = create_job(api, employer)
    assert job["language"] == "en" and job["translation"] is None


def test_a_translation_is_written_and_read_back_and_the_symmetry_rule_holds(
    api: Any, employer: Any
) -> None:
    """C4's symmetry rule with C13's members: a GET result POSTed creates an equal job."""
    job = create_job(api, employer, language="fr", translation=ENGLISH, **FRENCH)
    assert job["language"] == "fr" and job["translation"] == ENGLISH
    fetched = api.get(f"{JOBS}/{job['id']}", key=employer.key).json
    assert fetched == {k: v for k, v in job.items() if k != "warnings"}  # C10's, writes only
    body = {k: v for k, v in fetched.items() if k not in ("id", "referenceId")}
    again = api.post(JOBS, json=body, key=employer.key)
    assert again.status_code == 201, again.text
    assert {k: v for k, v in again.json.items() if k not in ("id", "warnings", "updatedAt")} == {
        k: v for k, v in fetched.items() if k not in ("id", "updatedAt")
    }


@pytest.mark.parametrize(
    ("translation", "expected"),
    [
        ({"title": "", "description": "<p>x</p>"}, [("translation.title", "too_short")]),
        ({"title": "x" * 257, "description": "<p>x</p>"}, [("translation.title", "too_long")]),
        ({"title": 5, "description": "<p>x</p>"}, [("translation.title", "invalid_type")]),
        ({"title": "a\x00b", "description": "<p>x</p>"}, [("translation.title", "invalid_format")]),
        ({"description": "<p>x</p>"}, [("translation.title", "required")]),
        ({"title": "x"}, [("translation.description", "required")]),
        ({"title": "x", "description": "  "}, [("translation.description", "too_short")]),
        (
            {"title": "x", "description": "<script>x</script>"},
            [("translation.description", "html_tag_not_allowed")],
        ),
        (
            {"title": "x", "description": '<a href="javascript:x">y</a>'},
            [("translation.description", "html_href_scheme")],
        ),
        (
            {"title": "", "description": '<p onclick="x">y</p>'},
            [
                ("translation.title", "too_short"),
                ("translation.description", "html_attribute_not_allowed"),
            ],
        ),
        ({}, [("translation.title", "required"), ("translation.description", "required")]),
        ("Baker", [("translation", "invalid_type")]),
    ],
)
def test_a_translation_breaking_the_rules_of_title_or_description_names_its_field(
    api: Any, employer: Any, translation: Any, expected: list[tuple[str, str]]
) -> None:
    result = api.post(JOBS, json=_body(translation=translation), key=employer.key)
    assert entries(result) == expected
    assert api.get(JOBS, key=employer.key).json["data"] == []  # nothing half-written


@pytest.mark.parametrize("value", ["de", "EN", "", "english", 1, None])
def test_language_is_en_or_fr(api: Any, employer: Any, value: Any) -> None:
    result = api.post(JOBS, json=_body(language=value), key=employer.key)
    [(field, _code)] = entries(result)
    assert field == "language"


def test_a_partial_put_replaces_the_translation_whole_and_null_removes_it(
    api: Any, employer: Any
) -> None:
    job = create_job(api, employer, translation=FRENCH)
    path = f"{JOBS}/{job['id']}"
    kept = api.put(path, json={"title": "Head Baker"}, key=employer.key)
    assert kept.status_code == 200 and kept.json["translation"] == FRENCH
    half = api.put(path, json={"translation": {"title": "Cheffe"}}, key=employer.key)
    assert entries(half) == [("translation.description", "required")]
    other = {"title": "Chef boulanger", "description": "<p>Diriger.</p>"}
    replaced = api.put(path, json={"translation": other}, key=employer.key)
    assert replaced.json["translation"] == other
    removed = api.put(path, json={"translation": None}, key=employer.key)
    assert removed.json["translation"] is None


def test_changing_language_while_keeping_the_translation_is_invalid(
    api: Any, employer: Any
) -> None:
    """C13: the stored French translation of an English job would be in the job's own
    language once the job is French."""
    job = create_job(api, employer, translation=FRENCH)
    path = f"{JOBS}/{job['id']}"
    assert entries(api.put(path, json={"language": "fr"}, key=employer.key)) == [
        ("translation", "invalid_format")
    ]
    assert api.get(path, key=employer.key).json["language"] == "en"
    swapped = {"language": "fr", **FRENCH, "translation": ENGLISH}
    assert api.put(path, json=swapped, key=employer.key).json["translation"] == ENGLISH
    same = api.put(path, json={"language": "fr"}, key=employer.key)  # unchanged: fine
    assert same.status_code == 200


def test_the_job_list_search_does_not_look_in_translations(api: Any, employer: Any) -> None:
    """C13: `q` searches the job's own title only."""
    create_job(api, employer, translation=FRENCH)
    assert api.get(JOBS, params={"q": "Boulangère"}, key=employer.key).json["data"] == []
    assert len(api.get(JOBS, params={"q": "Baker"}, key=employer.key).json["data"]) == 1


def _body(**overrides: Any) -> dict[str, Any]:
    return job_body(**overrides)


# --- choosing the language -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        ("fr-CA,fr;q=0.9,en;q=0.8", "fr"),
        ("en-US,en;q=0.9,fr;q=0.8", "en"),
        ("en;q=0.1, fr-CA;q=0.9", "fr"),
        ("fr;q=0.5, fr-CA, en;q=0.8", "fr"),  # the best range of a language counts
        ("en;q=0.5, fr;q=0.5", "en"),  # a tie: the one listed first
        ("fr;q=0.5, en;q=0.5", "fr"),
        ("FR", "fr"),
        ("de-DE, fr;q=0.3", "fr"),
        ("fr;q=0", "en"),  # French refused: the other one
        ("de", None),
        ("*", None),
        ("", None),
        (" , fr", "fr"),  # empty list elements are allowed
        ("fr;q=2", None),  # malformed: ignored whole
        ("fr;q=0.1234", None),
        ("fr;level=1", None),
        ("fr en", None),
        ("fr;q=", None),
        ("en;q=0, fr;q=0", None),
    ],
)
def test_accept_language_is_read_with_q_values_and_malformed_headers_ignored(
    header: str, chosen: str | None
) -> None:
    assert from_header(header) == chosen


def _page(app: WsgiApp, path: str, status: int = 200, accept: str | None = None) -> tuple[str, Any]:
    headers = {} if accept is None else {"Accept-Language": accept}
    result = pages(app).simulate_get(path, headers=headers)
    return assert_html(result, status), result


def _lang(page: str) -> str:
    match = re.search(r'<html lang="([^"]+)">', page)
    assert match
    return match[1]


def test_the_language_is_chosen_in_the_order_c13_gives(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """`?lang=`, then Accept-Language, then the job's language, then English."""
    fr_job = active_job(api, employer, language="fr", **FRENCH)
    en_job = active_job(api, employer)
    french, english = f"/jobs/{fr_job['id']}", f"/jobs/{en_job['id']}"
    assert _lang(_page(app, french)[0]) == "fr-CA"  # the job's language
    assert _lang(_page(app, english)[0]) == "en-CA"
    assert _lang(_page(app, english, accept="fr-CA,fr;q=0.9")[0]) == "fr-CA"
    assert _lang(_page(app, french, accept="en;q=0.8, fr;q=0.2")[0]) == "en-CA"
    with_both = "fr"
    assert _lang(_page(app, english + "?lang=en", accept=with_both)[0]) == "en-CA"  # ?lang= first
    assert _lang(_page(app, english + "?lang=fr")[0]) == "fr-CA"
    # Other `lang` values and malformed headers are ignored: the next rule decides.
    assert _lang(_page(app, french + "?lang=de")[0]) == "fr-CA"
    assert _lang(_page(app, english + "?lang=FR", accept=with_both)[0]) == "fr-CA"
    assert _lang(_page(app, french + "?lang=", accept="en;q=x")[0]) == "fr-CA"
    assert _lang(_page(app, "/jobs/999999", 404)[0]) == "en-CA"  # no job: English
    assert _lang(_page(app, "/jobs/999999", 404, accept=with_both)[0]) == "fr-CA"


def test_every_page_names_its_language_and_its_versions(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """C13: <html lang>, Content-Language, Vary, a link to the other language, hreflang."""
    job = active_job(api, employer)
    for code, tag, other, name in (
        ("en", "en-CA", "fr", "Français"),
        ("fr", "fr-CA", "en", "English"),
    ):
        for path, status in (
            (f"/jobs/{job['id']}", 200),
            (f"/jobs/{job['id']}/applied", 200),
            ("/jobs/999999", 404),
            ("/jobs/abc/applied", 404),
        ):
            page, result = _page(app, f"{path}?lang={code}", status)
            assert _lang(page) == tag, path
            assert result.headers["content-language"] == tag
            assert "Accept-Language" in result.headers["vary"]
            alternates = dict(
                re.findall(r'<link rel="alternate" hreflang="(en|fr)" href="([^"]+)">', page)
            )
            assert set(alternates) == {"en", "fr"}, path
            assert alternates["fr"].endswith(f"{path}?lang=fr")
            assert alternates["en"].endswith(f"{path}?lang=en")
            switch = re.search(
                rf'<a href="([^"]+)" hreflang="{other}" lang="{other}">{name}</a>', page
            )
            assert switch and switch[1] == alternates[other], path


def test_the_job_page_in_french_uses_the_locale_and_translates_every_string(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """C13: dates and money as Babel's fr_CA writes them (1er for the first), position type,
    categories, period and provinces in French."""
    salary = {"amount": 60000, "maxAmount": 70000.5, "period": {"id": 1}, "plusCommission": True}
    job = active_job(
        api,
        employer,
        salary=salary,
        locations=[{"description": "Quebec"}, {"description": "Toronto, ON"}],
        categories=[{"id": 14}, {"id": 26}],
        positionType={"id": 2},
    )
    page, _ = _page(app, f"/jobs/{job['id']}?lang=fr")
    nbsp = "\u00a0"
    assert f"60{nbsp}000{nbsp}$ à 70{nbsp}000,50{nbsp}$ par année, plus commissions" in page
    assert "Québec\u202f; Toronto, ON" in page
    assert "Technologies de l’information, Main-d’œuvre spécialisée" in page
    assert "<dd>Temps partiel</dd>" in page and "<dt>Lieux</dt>" in page
    assert "Publiée le" in page and "Envoyer ma candidature" in page
    assert 'action="/jobs/' in page and '/apply?lang=fr"' in page
    body = page.split("<body>")[1]
    for english in ("Send application", "Part Time", "Salary", "Posted", "Quebec", "a year"):
        assert english not in body


def test_dates_follow_each_locale_with_1er_in_french() -> None:
    fr, en = language("fr"), language("en")
    assert fr.date(date(2026, 11, 25)) == "25 novembre 2026"
    assert fr.date(date(2026, 11, 1)) == "1er novembre 2026"
    assert en.date(date(2026, 11, 25)) == "November 25, 2026"
    assert en.date(date(2026, 11, 1)) == "November 1, 2026"
    assert en.money(Decimal(60000)) == "$60,000" and en.money(Decimal("25.5")) == "$25.50"
    assert fr.money(Decimal(60000)) == "60\u00a0000\u00a0$"
    assert fr.money(Decimal("25.5")) == "25,50\u00a0$"


def test_a_job_shows_its_translation_in_the_other_language_and_marks_text_it_lacks(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    translated = active_job(api, employer, translation=FRENCH)
    page, _ = _page(app, f"/jobs/{translated['id']}?lang=fr")
    assert f"<h1>{FRENCH['title']}</h1>" in page and "Faire du <b>pain</b>" in page
    assert "Senior Baker" not in page.split("</style>")[-1]
    english_only = active_job(api, employer)
    page, _ = _page(app, f"/jobs/{english_only['id']}?lang=fr")
    assert '<h1 lang="en">Senior Baker</h1>' in page
    assert '<section class="description" lang="en">' in page
    assert '<h2 lang="fr">Description du poste</h2>' in page


def test_the_form_keeps_the_language_through_its_errors_the_303_and_the_thanks(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """C13: the chosen language carries through the POST, its errors, the 303, the thanks."""
    job = active_job(api, employer)
    client = pages(app)
    bad = {**APPLICANT, "email": "not-an-address", "name": ""}
    result = client.simulate_post(f"/jobs/{job['id']}/apply?lang=fr", **multipart(bad))
    page = assert_html(result, 422)
    assert _lang(page) == "fr-CA" and result.headers["content-language"] == "fr-CA"
    assert "Votre candidature n’a pas été envoyée\u00a0: 2 champs sont à corriger" in page
    assert "Veuillez entrer votre nom." in page and "Veuillez entrer une adresse courriel" in page
    result = client.simulate_post(f"/jobs/{job['id']}/apply?lang=fr", **multipart(APPLICANT))
    assert result.status_code == 303
    assert result.headers["location"] == f"/jobs/{job['id']}/applied?lang=fr"
    thanks = assert_html(client.simulate_get(result.headers["location"]), 200)
    assert _lang(thanks) == "fr-CA" and "Merci" in thanks
    # The job has no French: its English title is marked as such.
    said = 'Nous avons bien reçu votre candidature au poste <strong><span lang="en">Senior Baker'
    assert said in thanks
    assert f'hreflang="en" href="/jobs/{job["id"]}/applied?lang=en"' in thanks


def test_the_form_with_errors_links_to_the_job_page_in_the_other_language(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    bad = {**APPLICANT, "name": ""}
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply?lang=fr", **multipart(bad))
    page = assert_html(result, 422)
    assert f'<a href="/jobs/{job["id"]}?lang=en" hreflang="en" lang="en">English</a>' in page


def test_the_apply_redirect_keeps_the_chosen_language(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    client = pages(app)
    french = client.simulate_get(f"/jobs/{job['id']}/apply?lang=fr")
    assert french.status_code == 302
    assert french.headers["location"] == f"/jobs/{job['id']}?lang=fr#apply"
    plain = client.simulate_get(f"/jobs/{job['id']}/apply?lang=xx")
    assert plain.headers["location"] == f"/jobs/{job['id']}#apply"


def test_one_field_to_fix_is_said_in_the_singular_in_both_languages(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    bad = {**APPLICANT, "name": ""}
    for code, words in (
        ("en", "1 field needs fixing below"),
        ("fr", "1 champ est à corriger ci-dessous"),
    ):
        result = pages(app).simulate_post(f"/jobs/{job['id']}/apply?lang={code}", **multipart(bad))
        assert words in assert_html(result, 422)


def test_a_script_in_a_translation_is_escaped(app: WsgiApp, api: Any, employer: Any) -> None:
    title = "</h1><script>alert(1)</script>"
    job = active_job(api, employer, translation={"title": title, "description": "<p>x</p>"})
    page, _ = _page(app, f"/jobs/{job['id']}?lang=fr")
    assert "<script>alert" not in page
    assert "&lt;/h1&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page


# --- the kept page ---------------------------------------------------------------------------


TOKEN = re.compile(r'name="idempotencyKey" value="([^"]+)"')


def test_a_kept_page_is_served_only_while_the_job_and_its_employer_name_hold(
    app: WsgiApp, api: Any, employer: Any, sessions: sessionmaker[Session]
) -> None:
    """The page is kept per process (by job, language and address) and checked against the
    job's version and the employer's name on every request: a change is seen at once, in
    each language, and every answer has a form token of its own (C10)."""
    job = active_job(api, employer, translation=FRENCH)
    path = f"/jobs/{job['id']}"
    first, _ = _page(app, path)
    again, _ = _page(app, path)
    tokens = {TOKEN.findall(page)[0] for page in (first, again)}
    assert len(tokens) == 2  # the kept page, each time with a new token
    assert TOKEN_MARK not in first and TOKEN_MARK not in again
    assert f"<h1>{FRENCH['title']}</h1>" in _page(app, path + "?lang=fr")[0]

    api.put(f"{JOBS}/{job['id']}", json={"title": "Head Baker"}, key=employer.key)
    assert "<h1>Head Baker</h1>" in _page(app, path)[0]
    other = {"title": "Cheffe boulangère", "description": "<p>Diriger.</p>"}
    api.put(f"{JOBS}/{job['id']}", json={"translation": other}, key=employer.key)
    assert "<h1>Cheffe boulangère</h1>" in _page(app, path + "?lang=fr")[0]

    with sessions() as s:
        employers.get_employer(s, employer.id).name = "Érable inc."
        s.commit()
    assert "Érable inc." in _page(app, path)[0]
    api.put(f"{JOBS}/{job['id']}", json={"status": "archived"}, key=employer.key)
    _page(app, path, 404)


@pytest.mark.parametrize(
    ("code", "unreadable", "elsewhere", "not_allowed"),
    [
        (
            "en",
            "The form could not be read",
            "Apply on the employer’s site",
            "This request could not be answered",
        ),
        (
            "fr",
            "Le formulaire n’a pas pu être lu",
            "Postuler sur le site de l’employeur",
            "Cette demande n’a pas pu être traitée",
        ),
    ],
)
def test_the_pages_of_refused_forms_and_requests_come_in_both_languages(
    app: WsgiApp,
    api: Any,
    employer: Any,
    code: str,
    unreadable: str,
    elsewhere: str,
    not_allowed: str,
) -> None:
    """C13: the 400 of a form that cannot be read, the 409 of a job that takes applications
    elsewhere, and a page the service itself refuses (405), in the page's language."""
    job = active_job(api, employer)
    client = pages(app)
    form = multipart({k: v for k, v in APPLICANT.items() if k != "name"})
    name = b"--" + BOUNDARY.encode() + b'\r\nContent-Disposition: form-data; name="name"\r\n\r\n'
    form["body"] = name + b"Ad\xff\xfea\r\n" + form["body"]
    result = client.simulate_post(f"/jobs/{job['id']}/apply?lang={code}", **form)
    page = assert_html(result, 400)
    assert unreadable in page and result.headers["content-language"] == f"{code}-CA"
    assert f'href="/jobs/{job["id"]}?lang={code}"' in page  # back to the job, same language

    url_job = active_job(
        api, employer, applicantRoutingType={"id": 2}, applicationUrl="https://maple.test/a"
    )
    posted = client.simulate_post(
        f"/jobs/{url_job['id']}/apply?lang={code}", **multipart(APPLICANT)
    )
    assert elsewhere in assert_html(posted, 409)

    refused = client.simulate_delete(f"/jobs/{job['id']}?lang={code}")
    page = assert_html(refused, 405)
    assert not_allowed in page and _lang(page) == f"{code}-CA"


def test_a_write_of_only_the_translation_or_language_is_a_change_and_its_repeat_is_not(
    api: Any, employer: Any
) -> None:
    """C10's unchanged writes compare every stored member, C13's too: a new translation or
    language raises the version (a new ETag); sending it again changes nothing."""
    job = create_job(api, employer)
    path = f"{JOBS}/{job['id']}"
    before = api.get(path, key=employer.key).headers["etag"]
    changed = api.put(path, json={"translation": FRENCH}, key=employer.key)
    assert changed.status_code == 200 and changed.headers["etag"] != before
    again = api.put(path, json={"translation": FRENCH}, key=employer.key)
    assert again.headers["etag"] == changed.headers["etag"]
    swapped = api.put(
        path, json={"language": "fr", **FRENCH, "translation": ENGLISH}, key=employer.key
    )
    assert swapped.headers["etag"] != again.headers["etag"]
    assert swapped.json["language"] == "fr" and swapped.json["translation"] == ENGLISH
