"""C21 in a real browser: gunicorn serves a job that asks screening questions, Debian's
Chromium (driven by Playwright) sends the form with no answer (422: each question's message
tied to it), then answers every question (radio buttons, checkboxes, a textarea, a number)
and sends it; the application holds the answers and its copy, delivered to a real SMTP
server, lists them. In English and French, at 360 px, with axe-core finding no serious or
critical violation on the form, empty and refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.core.settings import Settings
from tests import test_browser as browser_tests
from tests import test_browser_search as search_tests
from tests.api.test_questions import QUESTIONS
from tests.conftest import SmtpSink
from tests.factories import job_body
from tests.test_browser import Server, call, employer_key, scroll_width
from tests.test_browser_search import SIZES, browser, serious
from workers.delivery import deliver

pytestmark = pytest.mark.slow
chromium, server, axe = browser_tests.chromium, browser_tests.server, search_tests.axe

WORDS = {
    "en": {
        "legend": "Are you legally entitled to work in Canada?",
        "fix": "2 fields need fixing",
        "answer": "Please answer this question.",
        "yes": "Yes",
        "night": "Night",
        "copy": "Which shift can you work?: Night",
    },
    "fr": {
        "legend": "Êtes-vous légalement autorisé à travailler au Canada?",
        "fix": "2 champs sont à corriger",
        "answer": "Veuillez répondre à cette question.",
        "yes": "Oui",
        "night": "Nuit",
        "copy": "Which shift can you work?\u00a0: Night",
    },
}


@pytest.mark.parametrize("code", ["en", "fr"])
def test_the_questions_are_answered_in_chromium_and_reach_the_copy(
    chromium: Path,
    server: Server,
    smtp_sink: SmtpSink,
    tmp_path: Path,
    axe: str,
    code: str,
) -> None:
    words = WORDS[code]
    key = employer_key(server, "Maple Bakery")
    if code == "fr":
        call(server.base, "PUT", "/api/v1.1/employer", key, {"language": "fr"})
    job = call(
        server.base, "POST", "/api/v1.1/jobs", key, job_body(status="active", questions=QUESTIONS)
    )
    viewport = SIZES["360"]
    with browser(chromium, tmp_path, viewport, f"{code}-CA") as page:
        page.goto(f"{server.base}/jobs/{job['id']}")
        assert page.locator("#q-workAuth legend").inner_text() == words["legend"]
        assert page.get_by_role("group", name=words["legend"]).is_visible()
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []
        page.fill("#name", "Zoë Tremblay")
        page.fill("#email", "zoe@example.org")
        # The browser holds back a form whose required radio buttons are not chosen: the
        # service's own check is reached with them set aside (novalidate).
        page.evaluate("document.querySelector('form').noValidate = true")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert words["fix"] in page.locator(".summary").inner_text()
        first = page.locator("#q-workAuth-1")
        assert first.get_attribute("aria-describedby") == "q-workAuth-error"
        assert page.locator("#q-workAuth-error").inner_text() == words["answer"]
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []
        page.get_by_label(words["yes"], exact=True).check()
        page.locator("#q-shift").get_by_label(words["night"], exact=True).check()
        page.check("#q-ovens-1")
        page.check("#q-ovens-3")
        page.fill("#q-why", "Crust")
        page.fill("#q-years", "7")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.url == f"{server.base}/jobs/{job['id']}/applied?lang={code}"
    [application] = call(server.base, "GET", "/api/v1.1/applications", key)["data"]
    assert [a["answer"] for a in application["answers"]] == [
        True,
        "night",
        ["deck", "wood"],
        "Crust",
        7,
    ]
    assert application["knockedOutBy"] == "shift"
    # The copy, delivered in this process to the real SMTP server (C8's browser test does so).
    assert deliver(server.sessions, Settings.from_env(server.env), application["id"]) == "sent"
    [message] = smtp_sink.messages
    text = message.get_body(("plain",))
    assert text is not None and words["copy"] in text.get_content()
