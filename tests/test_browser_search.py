"""C17 in a real browser: Debian's Chromium (driven by Playwright) searches, reads the results,
opens a job and sends its form wrong, at 360 px and 1280 px, in English and French; axe-core
(from the npm registry, installed by `make browser`) finds no serious or critical violation on
the search page, the results page, the error page, the job page and the refused form, and the
keyboard reaches the search fields in the order they are read.

axe runs in a context that bypasses the pages' CSP (which allows no script at all); the pages
themselves run none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, sync_playwright

from tests import test_browser as browser_tests
from tests.factories import job_body
from tests.services import missing
from tests.test_browser import CHROMIUM_ARGS, ROOT, Server, call, employer_key, scroll_width

pytestmark = pytest.mark.slow
chromium, server = browser_tests.chromium, browser_tests.server  # the fixtures, shared

AXE = ROOT / ".venv" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
SIZES: dict[str, ViewportSize] = {
    "360": {"width": 360, "height": 740},
    "1280": {"width": 1280, "height": 800},
}
# The search form's fields, in the order the keyboard should reach them.
FIELDS = ["q", "category", "province", "positionType", "workplaceType", "minPay", "days", "sort"]
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(" "))
  }));
}"""
WORDS = {
    "en": {"heading": "Find a job", "search": "Search", "empty": "No open job matches"},
    "fr": {"heading": "Trouver un emploi", "search": "Rechercher", "empty": "Aucun emploi"},
}


@pytest.fixture
def axe() -> str:
    if not AXE.exists():
        missing("axe-core (make browser)")
    return AXE.read_text(encoding="utf-8")


@contextmanager
def browser(executable: Path, tmp_path: Path, size: ViewportSize, locale: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / f"profile-{size['width']}-{locale}"),
            executable_path=str(executable),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport=size,
            locale=locale,
            bypass_csp=True,  # for axe's script only
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def serious(page: Page, axe: str) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it stands."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(axe)
    violations: list[dict[str, Any]] = page.evaluate(RUN_AXE)
    return [v for v in violations if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("code", ["en", "fr"])
@pytest.mark.parametrize("size", list(SIZES))
def test_search_results_job_and_form_pass_axe_in_chromium(
    chromium: Path, server: Server, tmp_path: Path, axe: str, code: str, size: str
) -> None:
    viewport = SIZES[size]
    key = employer_key(server, "Boulangerie Érable")
    call(server.base, "POST", "/api/v1.1/jobs", key, job_body(status="active", title="Baker"))
    remote = job_body(
        status="active",
        title="Night baker",
        workplaceType="remote",
        translation={"title": "Boulanger de nuit", "description": "<p>Cuire le pain.</p>"},
        locations=[{"description": "Montréal, QC"}],
    )
    call(server.base, "POST", "/api/v1.1/jobs", key, remote)
    words = WORDS[code]
    with browser(chromium, tmp_path, viewport, f"{code}-CA") as page:
        response = page.goto(f"{server.base}/")
        assert response is not None and response.status == 200
        assert page.locator("h1").inner_text() == words["heading"]
        assert page.locator(".results-list li").count() == 2
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []
        # The keyboard reaches the fields in reading order, then the button.
        page.locator("a[hreflang]").first.focus()
        reached = []
        for _ in range(len(FIELDS) + 1):
            page.keyboard.press("Tab")
            reached.append(
                page.evaluate("document.activeElement.id || document.activeElement.type")
            )
        assert reached == [*FIELDS, "submit"]

        # A search through the form, without JavaScript of the page's own.
        page.fill("#q", "baker")
        page.select_option("#workplaceType", "remote")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert "workplaceType=remote" in page.url and f"lang={code}" in page.url
        titles = page.locator(".results-list h3").all_inner_texts()
        assert titles == ["Boulanger de nuit" if code == "fr" else "Night baker"]
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []

        # The job page and its form, refused.
        with page.expect_navigation():
            page.click(".results-list h3 a")
        assert page.url.startswith(f"{server.base}/jobs/")
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []
        page.fill("#name", "Zoë Tremblay")
        page.fill("#email", "zoe@example.org")
        page.fill("#phone", "call me")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.locator(".summary").count() == 1
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []

        # The empty state and the error state.
        page.goto(f"{server.base}/jobs?q=astronaut&lang={code}")
        assert words["empty"] in page.locator(".empty").inner_text()
        assert serious(page, axe) == []
        response = page.goto(f"{server.base}/jobs?minPay=lots&lang={code}")
        assert response is not None and response.status == 400
        assert page.locator("[role=alert] li").count() == 1
        assert scroll_width(page) <= viewport["width"]
        assert serious(page, axe) == []
