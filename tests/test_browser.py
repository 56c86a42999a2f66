"""C8 end to end in a real browser: gunicorn serves the job page, Debian's Chromium (driven by
Playwright) fills the form and uploads a PDF, and the copy reaches a real SMTP server. Every
page in English and in French fits a 360 px phone, and the form works in both (C13).

The screenshot (a phone-sized viewport) is saved to test-artifacts/job-page.png.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, Page, ViewportSize, sync_playwright
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.migrate import upgrade
from models.db.unit_of_work import make_sessionmaker, session_scope
from tests.conftest import SmtpSink
from tests.factories import job_body
from tests.harness import Program, free_port
from tests.services import missing
from workers.delivery import deliver

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
PHONE: ViewportSize = {"width": 390, "height": 844}
NARROW: ViewportSize = {"width": 360, "height": 740}  # a small Android phone
# C9 variables the server must not take from the caller's environment.
UNSET = (
    "REDIS_URL",
    "PUBLIC_BASE_URL",
    "SMTP_USER",
    "SMTP_PASSWORD",
    "SMTP_STARTTLS",
    "MAIL_FROM",
    "JOBPOST_TIMEZONE",
    "PROMETHEUS_MULTIPROC_DIR",
)


def small_pdf(text: str) -> bytes:
    """A valid one-page PDF (cross-reference offsets computed) showing `text`."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


@pytest.fixture
def chromium() -> Path:
    if not CHROMIUM.exists():
        missing("Chromium")
    return CHROMIUM


@dataclass
class Server:
    base: str
    env: dict[str, str]
    sessions: sessionmaker[Session]


@pytest.fixture
def server(tmp_path: Path, smtp_sink: SmtpSink) -> Iterator[Server]:
    """gunicorn with the real app (`api.app:get_app()`) on a migrated SQLite file."""
    db_url = f"sqlite:///{tmp_path / 'jobpost.db'}"
    engine = make_engine(db_url)
    upgrade(engine)
    (tmp_path / "prometheus").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env |= {
        "DATABASE_URL": db_url,
        "CELERY_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}",
        "SMTP_HOST": smtp_sink.host,
        "SMTP_PORT": str(smtp_sink.port),
        "APPLY_RATE_LIMIT": "off",
        "JOBPOST_VAR_DIR": str(tmp_path),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    }
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "--workers", "1"]
    command += ["--bind", f"127.0.0.1:{port}", "api.app:get_app()"]
    base = f"http://127.0.0.1:{port}"
    try:
        with Program(command, tmp_path / "gunicorn.log", env=env, name="gunicorn") as gunicorn:
            gunicorn.wait_until(lambda: healthy(base), timeout=30, what="gunicorn's /healthz")
            yield Server(base, env, make_sessionmaker(engine))
    finally:
        engine.dispose()


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def call(base: str, method: str, path: str, key: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    headers = {"API-Key": key, "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base}{path}", data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _keep_error(message: ConsoleMessage, errors: list[str]) -> None:
    if message.type == "error":
        errors.append(message.text)


@contextmanager
def phone(
    chromium: Path,
    tmp_path: Path,
    viewport: ViewportSize,
    console_errors: list[str],
    locale: str = "en-CA",
) -> Iterator[Page]:
    """A page in headless Chromium emulating a phone set to `locale` (its Accept-Language);
    console errors go to `console_errors`."""
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(chromium),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport=viewport,
            device_scale_factor=2,
            is_mobile=True,
            has_touch=True,
            locale=locale,
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", lambda m: _keep_error(m, console_errors))
            yield page
        finally:
            context.close()


def employer_key(server: Server, name: str) -> str:
    with session_scope(server.sessions) as s:
        employer = employers.create_employer(s, name)
        return employers.issue_key(s, employer.id).key


def scroll_width(page: Page) -> int:
    width: int = page.evaluate("document.documentElement.scrollWidth")
    return width


def test_apply_in_chromium_and_the_copy_is_delivered(
    chromium: Path, server: Server, smtp_sink: SmtpSink, tmp_path: Path
) -> None:
    key = employer_key(server, "Maple Bakery")
    salary = {"amount": 60000, "maxAmount": 70000, "period": {"id": 1}, "plusCommission": True}
    description = (
        "<p>Bake <strong>bread</strong> and pastries for our two shops.</p>"
        "<ul><li>Early mornings</li><li>Team of six</li></ul>"
        '<p>More about us on <a href="https://maple.test/about">our site</a>.</p>'
    )
    locations = [{"description": "Toronto, ON"}, {"description": "Ottawa"}]
    body = job_body(status="active", salary=salary, description=description, locations=locations)
    job = call(server.base, "POST", "/api/v1.1/jobs", key, body)
    pdf = tmp_path / "elodie-cote-cv.pdf"
    pdf.write_bytes(small_pdf("Elodie Cote - Baker"))

    console_errors: list[str] = []
    with phone(chromium, tmp_path, PHONE, console_errors) as page:
        response = page.goto(f"{server.base}/jobs/{job['id']}")
        assert response is not None and response.status == 200
        assert page.locator("h1").inner_text() == "Senior Baker"
        assert "$60,000–$70,000 a year, plus commission" in page.content()
        # The inline stylesheet applies under the CSP: the honeypot is hidden, and the
        # page fits the phone's width (no horizontal scrolling).
        assert page.locator("#website").is_hidden()
        assert scroll_width(page) <= PHONE["width"]
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "job-page.png"), full_page=True)

        page.fill("#name", "Élodie Côté")
        page.fill("#email", "elodie@example.org")
        page.fill("#phone", "+1 (514) 555-0199")
        page.fill("#coverLetter", "Bonjour,\nI bake bread & croissants.\nMerci")
        page.set_input_files("#resume", str(pdf))
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.url == f"{server.base}/jobs/{job['id']}/applied?lang=en"
        assert page.locator("h1").inner_text() == "Thank you"
        page.screenshot(path=str(ARTIFACTS / "applied-page.png"))
    assert console_errors == []  # a CSP violation would be reported here

    [application] = call(server.base, "GET", "/api/v1.1/applications", key)["data"]
    assert application["name"] == "Élodie Côté"
    assert application["resume"]["contentType"] == "application/pdf"

    # Delivery in this process, on the same database and the same SMTP server; a real Celery
    # worker is tested elsewhere.
    settings = Settings.from_env(server.env)
    assert deliver(server.sessions, settings, application["id"]) == "sent"
    [message] = smtp_sink.messages
    assert message["To"] == "jobs@maple.test"
    assert message["Subject"] == "New application: Senior Baker"
    assert message["Reply-To"].addresses[0].addr_spec == "elodie@example.org"
    [attachment] = list(message.iter_attachments())
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_content() == pdf.read_bytes()
    fetched = call(server.base, "GET", f"/api/v1.1/applications/{application['id']}", key)
    assert fetched["status"] == "sent"


def test_long_words_fit_a_narrow_phone(chromium: Path, server: Server, tmp_path: Path) -> None:
    """C8 on a 360 px phone: a title, an employer name or a link without a break (up to 256
    and 128 characters) wraps, on the job page and on the thank-you page."""
    key = employer_key(server, "Boulangerie" * 11)
    title = "Pâtissier" * 28
    link = '<a href="https://maple.test/jobs">https://maple.test/' + "x" * 120 + "</a>"
    body = job_body(status="active", title=title, description=f"<p>See {link}.</p>")
    job = call(server.base, "POST", "/api/v1.1/jobs", key, body)
    console_errors: list[str] = []
    with phone(chromium, tmp_path, NARROW, console_errors) as page:
        page.goto(f"{server.base}/jobs/{job['id']}")
        assert page.locator("h1").inner_text() == title
        assert scroll_width(page) <= NARROW["width"]
        page.fill("#name", "Élodie Côté")
        page.fill("#email", "elodie@example.org")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.locator("strong").inner_text() == title
        assert scroll_width(page) <= NARROW["width"]
    assert console_errors == []


def test_the_form_takes_an_address_outside_ascii(
    chromium: Path, server: Server, tmp_path: Path
) -> None:
    """The service takes "zoë@exemple.ca" (C8, email as C4); so must the form in a browser,
    which checks an input of type email against ASCII-only rules before sending anything."""
    key = employer_key(server, "Maple Bakery")
    job = call(server.base, "POST", "/api/v1.1/jobs", key, job_body(status="active"))
    with phone(chromium, tmp_path, NARROW, []) as page:
        page.goto(f"{server.base}/jobs/{job['id']}")
        page.fill("#name", "Zoë Tremblay")
        page.fill("#email", "zoë@exemple.ca")
        with page.expect_navigation(timeout=5000):
            page.click("button[type=submit]")
        assert page.url == f"{server.base}/jobs/{job['id']}/applied?lang=en"
    [application] = call(server.base, "GET", "/api/v1.1/applications", key)["data"]
    assert application["email"] == "zoë@exemple.ca"


def test_a_refused_form_opens_at_its_messages(
    chromium: Path, server: Server, tmp_path: Path
) -> None:
    """After a 422 the page opens at the form's summary, focused, not at the job's title
    a long description away: the applicant sees, and a screen reader reads, what to fix."""
    key = employer_key(server, "Maple Bakery")
    description = "".join(f"<p>Duty number {n} of the baker.</p>" for n in range(40))
    body = job_body(status="active", description=description)
    job = call(server.base, "POST", "/api/v1.1/jobs", key, body)
    with phone(chromium, tmp_path, NARROW, []) as page:
        page.goto(f"{server.base}/jobs/{job['id']}")
        page.fill("#name", "Zoë Tremblay")
        page.fill("#email", "zoe@example.org")
        page.fill("#phone", "call me")
        with page.expect_navigation():
            page.click("button[type=submit]")
        summary = page.locator(".summary")
        assert "1 field needs fixing" in summary.inner_text()
        box = summary.bounding_box()
        assert box is not None and 0 <= box["y"] < NARROW["height"]
        assert summary.evaluate("e => e === document.activeElement")


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (
            "en",
            {
                "apply": "Send application",
                "fix": "1 field needs fixing",
                "thanks": "Thank you",
                "missing": "Job not found",
                "salary": "$60,000–$70,000 a year",
            },
        ),
        (
            "fr",
            {
                "apply": "Envoyer ma candidature",
                "fix": "1 champ est à corriger",
                "thanks": "Merci",
                "missing": "Offre introuvable",
                "salary": "60\u00a0000\u00a0$ à 70\u00a0000\u00a0$ par année",
            },
        ),
    ],
)
def test_every_page_in_each_language_fits_a_narrow_phone_and_the_form_works(
    chromium: Path, server: Server, tmp_path: Path, code: str, words: dict[str, str]
) -> None:
    """C13 at 360 px: the job page, the form with its errors, the thank-you page and the 404,
    in English and in French (the longer one), without horizontal scrolling; the language
    chosen by the browser's Accept-Language carries through the form."""
    key = employer_key(server, "Boulangerie Érable")
    salary = {"amount": 60000, "maxAmount": 70000, "period": {"id": 1}, "plusCommission": True}
    body = job_body(
        status="active",
        salary=salary,
        language="fr",
        title="Boulangère ou boulanger de nuit",
        description="<p>Pétrir, façonner et cuire le pain pour nos deux boutiques.</p>",
        translation={"title": "Night baker", "description": "<p>Knead, shape and bake.</p>"},
        locations=[{"description": "Quebec"}, {"description": "Montréal, QC"}],
        categories=[{"id": 20}, {"id": 26}, {"id": 14}],
    )
    job = call(server.base, "POST", "/api/v1.1/jobs", key, body)
    with phone(chromium, tmp_path, NARROW, [], locale=f"{code}-CA") as page:
        response = page.goto(f"{server.base}/jobs/{job['id']}")
        assert response is not None and response.headers["content-language"] == f"{code}-CA"
        assert page.locator("html").get_attribute("lang") == f"{code}-CA"
        assert words["salary"] in (page.locator(".facts").text_content() or "")
        assert page.locator("button[type=submit]").inner_text() == words["apply"]
        assert scroll_width(page) <= NARROW["width"]
        page.screenshot(path=str(ARTIFACTS / f"job-page-{code}.png"), full_page=True)
        page.fill("#name", "Zoë Tremblay")
        page.fill("#email", "zoe@example.org")
        page.fill("#phone", "call me")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert words["fix"] in page.locator(".summary").inner_text()
        assert scroll_width(page) <= NARROW["width"]
        page.fill("#phone", "+1 514 555 0199")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.url == f"{server.base}/jobs/{job['id']}/applied?lang={code}"
        assert page.locator("h1").inner_text() == words["thanks"]
        assert scroll_width(page) <= NARROW["width"]
        # The link to the other language, then the 404 in the browser's language.
        other = "fr" if code == "en" else "en"
        with page.expect_navigation():
            page.click(f"a[hreflang={other}]")
        assert page.locator("html").get_attribute("lang") == f"{other}-CA"
        response = page.goto(f"{server.base}/jobs/999999")
        assert response is not None and response.status == 404
        assert page.locator("h1").inner_text() == words["missing"]
        assert scroll_width(page) <= NARROW["width"]
    [application] = call(server.base, "GET", "/api/v1.1/applications", key)["data"]
    assert application["phone"] == "+1 514 555 0199"


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (
            "en",
            {
                "report": "Report this job",
                "fix": "1 field needs fixing",
                "thanks": "Thank you",
                "policy": "Job fraud policy",
                "privacy": "Privacy policy",
                "removed": "Job removed",
                "ai": "This employer uses artificial intelligence",
            },
        ),
        (
            "fr",
            {
                "report": "Signaler cette offre",
                "fix": "1 champ est à corriger",
                "thanks": "Merci",
                "policy": "Politique sur les offres d’emploi frauduleuses",
                "privacy": "Politique de confidentialité",
                "removed": "Offre retirée",
                "ai": "Cet employeur utilise l’intelligence artificielle",
            },
        ),
    ],
)
def test_the_report_pages_fit_a_narrow_phone_and_the_report_form_works(
    chromium: Path, server: Server, tmp_path: Path, code: str, words: dict[str, str]
) -> None:
    """C13 at 360 px: the job page's statements and report link, the report form with its
    errors, its thank-you page, both policy pages and the 410 page, in English and French,
    without horizontal scrolling; the report is stored and its job can be taken down."""
    from models import reports

    key = employer_key(server, "Boulangerie Érable")
    body = job_body(status="active", aiScreening=True, existingVacancy=False, language=code)
    job = call(server.base, "POST", "/api/v1.1/jobs", key, body)
    with phone(chromium, tmp_path, NARROW, [], locale=f"{code}-CA") as page:
        page.goto(f"{server.base}/jobs/{job['id']}")
        assert words["ai"] in (page.locator(".statements").text_content() or "")
        assert scroll_width(page) <= NARROW["width"]
        with page.expect_navigation():
            page.click(f"text={words['report']}")
        assert page.url == f"{server.base}/jobs/{job['id']}/report?lang={code}"
        assert scroll_width(page) <= NARROW["width"]
        page.check("input[name=reason][value=misleading]")
        page.fill("#details", "   ")  # passes the browser's `required`, not the service's
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert words["fix"] in page.locator(".summary").inner_text()
        assert scroll_width(page) <= NARROW["width"]
        page.fill("#details", "The pay in the posting is not the pay offered at the interview.")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert page.url == f"{server.base}/jobs/{job['id']}/reported?lang={code}"
        assert page.locator("h1").inner_text() == words["thanks"]
        assert scroll_width(page) <= NARROW["width"]
        for path, heading in (("job-fraud", "policy"), ("privacy", "privacy")):
            page.goto(f"{server.base}/policies/{path}")
            assert page.locator("h1").inner_text() == words[heading]
            assert scroll_width(page) <= NARROW["width"]
        with session_scope(server.sessions) as s:
            [report] = reports.listing(s, "open")
            assert report.reason == "misleading" and report.job_id == job["id"]
            reports.resolve(s, report.id, take_down=True, note=None)
        response = page.goto(f"{server.base}/jobs/{job['id']}")
        assert response is not None and response.status == 410
        assert page.locator("h1").inner_text() == words["removed"]
        assert scroll_width(page) <= NARROW["width"]
