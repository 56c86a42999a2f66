"""C20 in a real browser: Debian's Chromium (driven by Playwright) opens an application's
private status page from its receipt's link and erases the application by keyboard alone,
at 360 px and 1280 px, in English and French: the status page, the confirmation page, the
status page saying it was erased, and a link that does not work (404). On each, axe-core
(`make browser`) finds no serious or critical violation and nothing scrolls sideways.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize
from sqlalchemy import select

from models.applications import outbox, receipts
from models.core.dates import utcnow
from models.db.entities import Receipt
from models.db.unit_of_work import session_scope
from tests import test_browser as browser_tests
from tests import test_browser_search as search_tests
from tests.factories import job_body
from tests.test_browser import Server, call, employer_key, scroll_width
from tests.test_browser_search import SIZES, browser, serious

pytestmark = pytest.mark.slow
chromium, server, axe = browser_tests.chromium, browser_tests.server, search_tests.axe

WORDS = {
    "en": {
        "status": "Your application",
        "received": "Received on",
        "ask": "Erase your application?",
        "erased": "This application was erased",
        "gone": "This link does not work",
    },
    "fr": {
        "status": "Votre candidature",
        "received": "Reçue le",
        "ask": "Effacer votre candidature\u00a0?",
        "erased": "Cette candidature a été effacée",
        "gone": "Ce lien ne fonctionne pas",
    },
}


def passes(page: Page, axe: str, viewport: ViewportSize, heading: str) -> None:
    """The page is the one expected, fits the viewport and passes axe."""
    assert page.locator("h1").inner_text() == heading
    assert scroll_width(page) <= viewport["width"]
    assert serious(page, axe) == []


def press(page: Page, key: str, status: int = 200) -> None:
    """Press `key` where the focus is and wait for the page it sends to (after redirects)."""
    with page.expect_navigation() as navigation:
        page.keyboard.press(key)
    response = navigation.value
    assert response is not None and response.status == status, page.url


def receipt_token(server: Server, code: str) -> str:
    """An application through the API and its receipt's token, as the worker's claim makes
    it (no worker runs here)."""
    key = employer_key(server, "Maple Bakery")
    job = call(server.base, "POST", "/api/v1.1/jobs", key, job_body(status="active"))
    document = {"name": "Zoé Roy", "email": "zoe@example.org"}
    call(server.base, "POST", f"/api/v1.1/jobs/{job['id']}/applications?lang={code}", key, document)
    with session_scope(server.sessions) as s:
        receipt_id = s.scalar(select(Receipt.id).order_by(Receipt.id.desc()).limit(1))
        assert receipt_id is not None
        claimed = receipts.claim(s, receipt_id, now=utcnow(), timing=outbox.Timing())
        assert claimed is not None and claimed.token is not None
        return claimed.token


@pytest.mark.parametrize("code", ["en", "fr"])
@pytest.mark.parametrize("size", list(SIZES))
def test_status_pages_pass_axe_and_erase_by_keyboard_in_chromium(
    chromium: Path, server: Server, tmp_path: Path, axe: str, code: str, size: str
) -> None:
    viewport, words = SIZES[size], WORDS[code]
    token = receipt_token(server, code)
    with browser(chromium, tmp_path, viewport, f"{code}-CA") as page:
        response = page.goto(f"{server.base}/applications/status/{token}?lang={code}")
        assert response is not None and response.status == 200
        passes(page, axe, viewport, words["status"])
        assert words["received"] in page.locator("main").inner_text()

        # Its button asks first; the confirmation's own button erases.
        page.locator("main button").focus()
        press(page, "Enter")
        passes(page, axe, viewport, words["ask"])
        page.locator("main button").focus()
        press(page, "Enter")
        assert page.url == f"{server.base}/applications/status/{token}?lang={code}"
        passes(page, axe, viewport, words["status"])
        assert words["erased"] in page.locator("main").inner_text()
        assert page.locator("main form").count() == 0

        response = page.goto(f"{server.base}/applications/status/nope?lang={code}")
        assert response is not None and response.status == 404
        passes(page, axe, viewport, words["gone"])
