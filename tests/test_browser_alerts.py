"""C19 in a real browser: Debian's Chromium (driven by Playwright) follows a search's link to the
alert sign-up and goes through every page of an alert by keyboard alone, at 360 px and
1280 px, in English and French: the form empty, refused (422) and sent, "check your email",
the confirmation's button, the manage page (confirmed, then unsubscribed), the unsubscribe
link's button and a link that does not work (404). On each, axe-core (from the npm registry,
`make browser`) finds no serious or critical violation and nothing scrolls sideways.

The pages run no script (their CSP allows none): the form is sent by the keyboard's Enter,
reaching its fields, in the order they are read, with Tab.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize

from models.alerts import subscriptions as alerts
from models.core.dates import utcnow
from models.db.unit_of_work import session_scope
from models.jobs.feeds import Filters
from tests import test_browser as browser_tests
from tests import test_browser_search as search_tests
from tests.test_browser import Server, scroll_width
from tests.test_browser_search import SIZES, browser, serious

pytestmark = pytest.mark.slow
chromium, server, axe = browser_tests.chromium, browser_tests.server, search_tests.axe

WORDS = {
    "en": {
        "follow": "Get these jobs by email",
        "form": "Get job alerts by email",
        "bad_email": "Please enter a valid email address, like name@example.com.",
        "sent": "Check your email",
        "confirm": "Confirm your job alert",
        "manage": "Your job alert",
        "unsubscribe": "Unsubscribe from this job alert",
        "unsubscribed": "You are unsubscribed",
        "gone": "This link does not work",
    },
    "fr": {
        "follow": "Recevoir ces offres par courriel",
        "form": "Recevoir les offres par courriel",
        "bad_email": "Veuillez entrer une adresse courriel valide, par exemple nom@exemple.ca.",
        "sent": "Vérifiez vos courriels",
        "confirm": "Confirmez votre alerte emploi",
        "manage": "Votre alerte emploi",
        "unsubscribe": "Se désabonner de cette alerte emploi",
        "unsubscribed": "Vous êtes désabonné",
        "gone": "Ce lien ne fonctionne pas",
    },
}
# What the keyboard reaches on the sign-up form after the language link, in reading order.
FORM_ORDER = ["email", "frequency", "A", "submit"]  # the address, the radios, privacy, send
FOCUSED = "(e => e.id || e.name || e.type || e.tagName)(document.activeElement)"
SEARCH = Filters(q="baker", province="QC")


def passes(page: Page, axe: str, viewport: ViewportSize, heading: str) -> None:
    """The page is the one expected, fits the viewport and passes axe."""
    assert page.locator("h1").inner_text() == heading
    assert scroll_width(page) <= viewport["width"]
    assert serious(page, axe) == []


def tab_order(page: Page, start: str, stops: int) -> list[str]:
    page.locator(start).first.focus()
    reached = []
    for _ in range(stops):
        page.keyboard.press("Tab")
        reached.append(str(page.evaluate(FOCUSED)))
    return reached


def press(page: Page, key: str, status: int = 200) -> None:
    """Press `key` where the focus is and wait for the page it sends to (after redirects)."""
    with page.expect_navigation() as navigation:
        page.keyboard.press(key)
    response = navigation.value
    assert response is not None and response.status == status, page.url


def confirm_token(server: Server, email: str, code: str) -> str:
    """A new confirmation link to the browser's alert, as its email carries one (C19)."""
    with session_scope(server.sessions) as s:
        return alerts.sign_up(s, email, "daily", code, SEARCH, now=utcnow()).confirm_token


@pytest.mark.parametrize("code", ["en", "fr"])
@pytest.mark.parametrize("size", list(SIZES))
def test_alert_pages_pass_axe_and_work_by_keyboard_in_chromium(
    chromium: Path, server: Server, tmp_path: Path, axe: str, code: str, size: str
) -> None:
    viewport, words = SIZES[size], WORDS[code]
    email = f"zoe-{code}-{size}@example.org"
    with browser(chromium, tmp_path, viewport, f"{code}-CA") as page:
        # The search's own link to its sign-up, the form empty.
        page.goto(f"{server.base}/jobs?q=baker&province=QC&lang={code}")
        page.get_by_role("link", name=words["follow"]).focus()
        press(page, "Enter")
        assert page.url == f"{server.base}/alerts/new?q=baker&province=QC&lang={code}"
        passes(page, axe, viewport, words["form"])
        assert tab_order(page, "a[hreflang]", len(FORM_ORDER)) == FORM_ORDER

        # An address the browser takes and the rules refuse: the form again, 422, as typed.
        page.locator("#email").focus()
        page.keyboard.type("zoe@example")
        page.keyboard.press("Tab")
        page.keyboard.press("ArrowDown")  # weekly, by the radios' own keys
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        press(page, "Enter", 422)
        passes(page, axe, viewport, words["form"])
        assert page.locator(".summary").count() == 1
        assert page.locator("#email").get_attribute("aria-invalid") == "true"
        assert page.locator("#email-error").inner_text() == words["bad_email"]
        assert page.locator("input[name=frequency][value=weekly]").is_checked()

        # Mended and sent from the field itself: "check your email".
        page.locator("#email").focus()
        page.keyboard.press("Control+A")
        page.keyboard.type(email)
        press(page, "Enter")
        assert page.url == f"{server.base}/alerts/sent?lang={code}"
        passes(page, axe, viewport, words["sent"])

        # The confirmation link's page: one button, which confirms, then the manage page.
        token = confirm_token(server, email, code)
        page.goto(f"{server.base}/alerts/confirm/{token}?lang={code}")
        passes(page, axe, viewport, words["confirm"])
        page.locator("main button").focus()
        press(page, "Enter")
        assert "/alerts/manage/" in page.url and "saved=confirmed" in page.url
        passes(page, axe, viewport, words["manage"])
        assert email in page.locator("main").inner_text()

        # The frequency changed by keyboard, saved, and said so.
        assert page.locator("input[name=frequency][value=weekly]").is_checked()
        page.locator("input[name=frequency]:checked").focus()
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Tab")
        press(page, "Enter")
        assert "saved=1" in page.url and page.locator("[role=status]").count() == 1
        assert page.locator("input[name=frequency][value=daily]").is_checked()
        passes(page, axe, viewport, words["manage"])
        manage = page.url.split("?", 1)[0]

        # The unsubscribe link of every email: its button, then done; the manage page says so.
        page.goto(f"{manage.replace('/manage/', '/unsubscribe/')}?lang={code}")
        passes(page, axe, viewport, words["unsubscribe"])
        page.locator("main button").focus()
        press(page, "Enter")
        passes(page, axe, viewport, words["unsubscribed"])
        page.goto(f"{manage}?lang={code}")
        passes(page, axe, viewport, words["manage"])
        assert page.locator("main form").count() == 0  # nothing left to change
        again = page.locator("main a[href^='/alerts/new']").get_attribute("href")
        assert again == f"/alerts/new?q=baker&province=QC&lang={code}"

        # A link that does not work.
        response = page.goto(f"{server.base}/alerts/manage/nope?lang={code}")
        assert response is not None and response.status == 404
        passes(page, axe, viewport, words["gone"])
