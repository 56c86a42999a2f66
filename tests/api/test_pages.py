"""C8 public pages: the job page (HTML, JSON-LD, CSP), the apply redirect, the form, thanks.

HTML routes go through a falcon TestClient that checks each answer against openapi.json, as the
`api` fixture does; the employer's view is read through `api`.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import falcon
import falcon.testing
import pytest
from sqlalchemy.orm import Session, sessionmaker

from api import forms, html_render
from api.app import Collaborators, WsgiApp, create_app
from models.core.settings import Settings
from models.db.entities import Application
from tests.conftest import CheckedClient
from tests.factories import create_job

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
BOUNDARY = "jobpostTestBoundary7MA4YWxkTrZu0gW"
SALARY = {"amount": 60000, "maxAmount": 70000, "period": {"id": 1}, "plusCommission": True}
APPLICANT = {
    "name": "Élodie Côté",
    "email": "elodie@example.org",
    "phone": "+1 (514) 555-0199",
    "coverLetter": "I bake <b>good</b> bread & cakes.",
    "website": "",
}


def pages(app: WsgiApp) -> falcon.testing.TestClient:
    return CheckedClient(app)


def active_job(api: Any, employer: Any, **overrides: Any) -> dict[str, Any]:
    return create_job(api, employer, **{"status": "active", **overrides})


def multipart(fields: dict[str, str], resume: tuple[str, bytes] | None = None) -> dict[str, Any]:
    """simulate_post keywords for a multipart/form-data body, as a browser sends it."""
    out = b""
    for name, value in fields.items():
        head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        out += head.encode() + value.encode() + b"\r\n"
    if resume is not None:
        filename, data = resume
        head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="resume"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        out += head.encode() + data + b"\r\n"
    out += f"--{BOUNDARY}--\r\n".encode()
    return {"body": out, "headers": {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}}


def json_ld(page: str) -> dict[str, Any]:
    scripts = re.findall(r'<script type="application/ld\+json">(.*?)</script>', page, re.S)
    assert len(scripts) == 1
    data: dict[str, Any] = json.loads(scripts[0])
    return data


def assert_html(result: falcon.testing.Result, status: int) -> str:
    assert result.status_code == status, result.text
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert result.headers["x-content-type-options"] == "nosniff"
    assert result.headers["referrer-policy"]
    assert result.text.startswith("<!doctype html>")
    return result.text


def stored(api: Any, employer: Any) -> list[dict[str, Any]]:
    result = api.get("/api/v1.1/applications", key=employer.key)
    assert result.status_code == 200
    data: list[dict[str, Any]] = result.json["data"]
    return data


def test_email_job_page_shows_each_field_and_the_form(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """C8: title, employer, locations, position type, salary and closing date in words."""
    two = [{"description": "Toronto, ON"}, {"description": "Ottawa, ON"}]
    job = active_job(api, employer, salary=SALARY, locations=two)
    page = assert_html(pages(app).simulate_get(f"/jobs/{job['id']}"), 200)
    assert "<h1>Senior Baker</h1>" in page
    assert "Maple Corp" in page and "Confidential employer" not in page
    assert "Toronto, ON; Ottawa, ON" in page and "Full Time" in page
    assert "$60,000–$70,000 a year, plus commission" in page
    assert "Closes" in page and "May 9, 2026" in page  # publishDate 10 March + 60 days (C4, C13)
    assert "<p>Bake <strong>bread</strong>.</p>" in page
    assert 'name="viewport"' in page
    assert '<section id="apply">' in page
    action = f'action="/jobs/{job["id"]}/apply?lang=en"'
    assert action in page and 'enctype="multipart/form-data"' in page
    for name in ("name", "email", "phone", "coverLetter", "resume", "website"):
        assert f'name="{name}"' in page
    assert re.search(r'<input id="website" name="website"[^>]*>', page)
    assert 'type="file"' in page
    # Canonical and alternate (C13) links load nothing.
    loaded = [
        link
        for link in re.findall(r"<link[^>]*>", page)
        if not re.match('<link rel="(canonical|alternate)"', link)
    ]
    assert loaded == ['<link rel="icon" href="data:,">']
    assert "src=" not in page  # no external assets


def test_page_sends_a_strict_content_security_policy(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(api, employer)
    result = pages(app).simulate_get(f"/jobs/{job['id']}")
    csp = [d.strip() for d in result.headers["content-security-policy"].split(";")]
    assert "default-src 'none'" in csp and "form-action 'self'" in csp
    assert "base-uri 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "img-src 'self' data:" in csp
    assert any(re.fullmatch(r"style-src 'sha256-[A-Za-z0-9+/]+=*'", d) for d in csp)
    assert "script-src" not in result.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("zone", "close", "expected"),
    [
        ("America/Toronto", date(2026, 3, 8), "2026-03-08T23:59:59-04:00"),  # springs forward
        ("America/Toronto", date(2026, 11, 1), "2026-11-01T23:59:59-05:00"),  # falls back
        ("America/St_Johns", date(2028, 2, 29), "2028-02-29T23:59:59-03:30"),
        ("Pacific/Kiritimati", date(2026, 12, 31), "2026-12-31T23:59:59+14:00"),
        # Clocks fall back at midnight here: 23:00 to 23:59:59 come twice, the day ends after
        # the second time.
        ("America/Santiago", date(2026, 4, 4), "2026-04-04T23:59:59-04:00"),
    ],
)
def test_valid_through_is_the_last_second_of_the_close_date(
    zone: str, close: date, expected: str
) -> None:
    """JSON-LD validThrough: the end of closeDate in JOBPOST_TIMEZONE, with its offset."""
    tz = ZoneInfo(zone)
    text = html_render.valid_through(close, tz)
    assert text == expected
    last = datetime.fromisoformat(text)
    assert last.astimezone(tz).date() == close
    assert (last + timedelta(seconds=1)).astimezone(tz).date() == close + timedelta(days=1)


def test_json_ld_job_posting_has_the_fields(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(api, employer, salary=SALARY)
    data = json_ld(pages(app).simulate_get(f"/jobs/{job['id']}").text)
    assert data["@context"] == "https://schema.org" and data["@type"] == "JobPosting"
    assert data["title"] == "Senior Baker"
    assert data["description"] == job["description"]
    assert data["datePosted"] == "2026-03-10"
    assert data["validThrough"] == "2026-05-09T23:59:59-04:00"  # America/Toronto, EDT
    assert data["directApply"] is True  # the form is on the page (Email routing)
    assert data["hiringOrganization"] == {"@type": "Organization", "name": "Maple Corp"}
    assert data["jobLocation"] == [
        {
            "@type": "Place",
            "address": {
                "@type": "PostalAddress",
                "addressLocality": "Toronto",
                "addressRegion": "ON",
                "addressCountry": "CA",
            },
        }
    ]
    assert data["employmentType"] == "FULL_TIME"
    assert data["baseSalary"] == {
        "@type": "MonetaryAmount",
        "currency": "CAD",
        "value": {
            "@type": "QuantitativeValue",
            "minValue": 60000,
            "maxValue": 70000,
            "unitText": "YEAR",
        },
    }


def test_hourly_salary_contract_and_province(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(
        api,
        employer,
        positionType={"id": 3},
        locations=[{"description": "Ontario"}],
        salary={"amount": 25.5, "period": {"id": 5}},
    )
    page = pages(app).simulate_get(f"/jobs/{job['id']}").text
    assert "$25.50 an hour" in page and "commission" not in page
    data = json_ld(page)
    assert data["employmentType"] == "CONTRACTOR"
    assert data["jobLocation"][0]["address"] == {
        "@type": "PostalAddress",
        "addressRegion": "ON",
        "addressCountry": "CA",
    }
    assert data["baseSalary"]["value"] == {
        "@type": "QuantitativeValue",
        "value": 25.5,
        "unitText": "HOUR",
    }


@pytest.mark.parametrize(
    ("salary", "words"),
    [
        ({"amount": 0, "period": {"id": 1}, "plusCommission": True}, "Commission only"),
        ({"amount": 0, "period": {"id": 5}}, "$0 an hour"),
    ],
)
def test_a_salary_of_nothing_is_no_base_salary(
    app: WsgiApp, api: Any, employer: Any, salary: dict[str, Any], words: str
) -> None:
    """C8: pay of $0 is said as it is (commission only, or unpaid), and the JSON-LD states
    no baseSalary, which search engines would show as a $0 salary."""
    job = active_job(api, employer, salary=salary)
    page = pages(app).simulate_get(f"/jobs/{job['id']}").text
    assert f"<dd>{words}</dd>" in page
    assert "baseSalary" not in json_ld(page)


def test_each_address_of_a_job_page_names_one_canonical_address(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """/jobs/01 and /jobs/7/ serve the page of /jobs/7: a search engine is told which to list
    (PUBLIC_BASE_URL, else where the server listens, as for the API's links, C6)."""
    job = active_job(api, employer)
    for path in (f"/jobs/{job['id']}", f"/jobs/0{job['id']}", f"/jobs/{job['id']}/"):
        page = assert_html(pages(app).simulate_get(path), 200)
        links = re.findall(r'<link rel="canonical" href="([^"]+)">', page)
        # Each language's page is its own (C13): English by default.
        assert links == [f"http://127.0.0.1:8000/jobs/{job['id']}?lang=en"], path


def test_confidential_job_hides_the_employer(app: WsgiApp, api: Any, employer: Any) -> None:
    """C2, C8: the name is hidden from applicants, in the page and in the JSON-LD."""
    job = active_job(api, employer, confidential=True)
    page = pages(app).simulate_get(f"/jobs/{job['id']}").text
    assert "Confidential employer" in page and "Maple Corp" not in page
    assert "hiringOrganization" not in json_ld(page)


def test_description_links_get_rel_only_when_rendered(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """C4 stores the description without rel; the page adds it to every link."""
    description = '<p>See <a href="https://maple.test/about" target="_blank">about us</a>.</p>'
    job = active_job(api, employer, description=description)
    page = pages(app).simulate_get(f"/jobs/{job['id']}").text
    links = re.findall(r"<a [^>]*>about us</a>", page)
    assert len(links) == 1
    assert 'href="https://maple.test/about"' in links[0]
    assert 'rel="nofollow noopener noreferrer"' in links[0]
    fetched = api.get(f"/api/v1.1/jobs/{job['id']}", key=employer.key).json
    assert fetched["description"] == description and "rel=" not in fetched["description"]
    assert "rel=" not in json_ld(page)["description"]


def test_script_in_the_title_cannot_break_out(app: WsgiApp, api: Any, employer: Any) -> None:
    title = "</script><script>alert(1)</script> & <!-- Baker"
    job = active_job(api, employer, title=title)
    page = pages(app).simulate_get(f"/jobs/{job['id']}").text
    assert page.count("</script>") == 1  # the JSON-LD's own end
    assert page.lower().count("<script") == 1
    assert "<!--" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;!-- Baker" in page
    assert json_ld(page)["title"] == title


@pytest.mark.parametrize("path", ["/jobs/{id}", "/jobs/{id}/apply"])
def test_jobs_not_active_are_a_404_page(app: WsgiApp, api: Any, employer: Any, path: str) -> None:
    draft = create_job(api, employer)
    archived = create_job(api, employer, status="archived")
    client = pages(app)
    for job_id in (draft["id"], archived["id"], 999_999, "abc", 99_999_999_999):
        page = assert_html(client.simulate_get(path.format(id=job_id)), 404)
        assert "Job not found" in page
        assert "Senior Baker" not in page
    posted = client.simulate_post(f"/jobs/{archived['id']}/apply", **multipart(APPLICANT))
    assert_html(posted, 404)
    assert stored(api, employer) == []


def test_apply_redirects_to_the_form_or_the_employer_site(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    by_email = active_job(api, employer)
    by_url = active_job(
        api,
        employer,
        applicantRoutingType={"id": 2},
        applicationUrl="https://careers.maple.test/apply?job=7",
    )
    client = pages(app)
    result = client.simulate_get(f"/jobs/{by_email['id']}/apply")
    assert result.status_code == 302
    assert result.headers["location"] == f"/jobs/{by_email['id']}#apply"
    result = client.simulate_get(f"/jobs/{by_url['id']}/apply")
    assert result.status_code == 302
    assert result.headers["location"] == "https://careers.maple.test/apply?job=7"


def test_url_routed_job_shows_the_link_and_no_form(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(
        api,
        employer,
        applicantRoutingType={"id": 2},
        applicationUrl="https://careers.maple.test/apply?job=7&lang=en",
    )
    client = pages(app)
    page = assert_html(client.simulate_get(f"/jobs/{job['id']}"), 200)
    assert 'href="https://careers.maple.test/apply?job=7&amp;lang=en"' in page
    assert "<form" not in page and 'name="website"' not in page
    assert json_ld(page)["directApply"] is False  # applicants apply on the employer's site
    posted = client.simulate_post(f"/jobs/{job['id']}/apply", **multipart(APPLICANT))
    page = assert_html(posted, 409)
    assert 'href="https://careers.maple.test/apply?job=7&amp;lang=en"' in page
    assert stored(api, employer) == []


def test_form_success_is_a_303_and_the_application_is_stored(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    client = pages(app)
    result = client.simulate_post(
        f"/jobs/{job['id']}/apply", **multipart(APPLICANT, ("my cv.pdf", PDF))
    )
    assert result.status_code == 303, result.text
    assert result.headers["location"] == f"/jobs/{job['id']}/applied?lang=en"
    thanks = assert_html(client.simulate_get(result.headers["location"]), 200)
    assert "Thank you" in thanks and "Senior Baker" in thanks
    [application] = stored(api, employer)
    assert application["jobId"] == job["id"]
    assert application["name"] == APPLICANT["name"]
    assert application["email"] == APPLICANT["email"]
    assert application["phone"] == APPLICANT["phone"]
    assert application["coverLetter"] == APPLICANT["coverLetter"]
    assert application["resume"]["contentType"] == "application/pdf"
    assert application["resume"]["size"] == len(PDF)
    assert application["status"] == "pending"
    resume = api.get(f"/api/v1.1/applications/{application['id']}/resume", key=employer.key)
    assert resume.content == PDF


def test_a_line_break_of_the_cover_letter_counts_as_one_character(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    """The textarea's maxlength (10,000, C8) counts a line break as one character, and the
    browser sends each as CRLF: a letter the form allowed is accepted, stored with LF breaks."""
    job = active_job(api, employer)
    letter = "\n".join(["x" * 99] * 100) + "x"  # 10,000 characters, 99 of them line breaks
    sent = {**APPLICANT, "coverLetter": letter.replace("\n", "\r\n")}
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(sent))
    assert result.status_code == 303, result.text
    assert stored(api, employer)[0]["coverLetter"] == letter


def test_form_enqueues_delivery_like_the_api(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, api: Any, employer: Any
) -> None:
    """The form uses Intake: the same outbox entry and after-commit enqueue as the API (C8)."""
    calls: list[tuple[int, str | None]] = []
    parts = Collaborators(enqueue=lambda i, r: calls.append((i, r)))
    app = create_app(settings, sessions, parts, today=clock)
    job = active_job(api, employer)
    form = multipart(APPLICANT)
    headers = {**form["headers"], "X-Request-ID": "form-1"}
    result = pages(app).simulate_post(
        f"/jobs/{job['id']}/apply", body=form["body"], headers=headers
    )
    assert result.status_code == 303
    with sessions() as s:
        [application] = s.query(Application).all()
    assert calls == [(application.id, "form-1")]


def test_form_errors_rerender_the_form_with_the_input_and_messages(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    fields = {**APPLICANT, "name": " ", "email": "not-an-email", "phone": "call me"}
    result = pages(app).simulate_post(
        f"/jobs/{job['id']}/apply", **multipart(fields, ("cv.exe", b"MZ\x90\x00\x03\x00\x00"))
    )
    page = assert_html(result, 422)
    assert result.headers["cache-control"] == "no-store"
    assert "Senior Baker" in page and '<section id="apply">' in page
    assert "Toronto, ON" in page  # the job's locations, which intake itself does not load
    assert "4 fields need fixing" in page
    assert 'value="not-an-email"' in page and 'value="call me"' in page
    assert "I bake &lt;b&gt;good&lt;/b&gt; bread &amp; cakes.</textarea>" in page
    for name, message in [
        ("name", "Please enter your name."),
        ("email", "Please enter a valid email address"),
        ("phone", "A phone number has only digits"),
        ("resume", "Your résumé must be a PDF"),
    ]:
        tag = re.search(rf'<(?:input|textarea) id="{name}"[^>]*>', page)
        assert tag and 'aria-invalid="true"' in tag.group(0), name
        assert re.search(rf'<p class="error" id="{name}-error">{re.escape(message)}', page)
    assert 'id="coverLetter-error"' not in page
    assert stored(api, employer) == []


def test_a_dropped_resume_is_asked_for_again(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(api, employer)
    fields = {**APPLICANT, "email": ""}
    result = pages(app).simulate_post(
        f"/jobs/{job['id']}/apply", **multipart(fields, ("cv.pdf", PDF))
    )
    page = assert_html(result, 422)
    assert "Please enter your email address." in page
    # The note is the file input's description, as an error message is (C8, accessible form).
    tag = re.search(r'<input id="resume"[^>]*aria-describedby="([^"]+)"', page)
    assert tag, "the résumé input is not described by the note"
    note = rf'<p class="error" id="{tag.group(1)}">Please choose your résumé again'
    assert re.search(note, page)
    assert 'value="Élodie Côté"' in page


def test_honeypot_filled_is_the_normal_success_and_nothing_is_stored(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    job = active_job(api, employer)
    fields = {**APPLICANT, "website": "https://spam.example"}
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(fields))
    assert result.status_code == 303
    assert result.headers["location"] == f"/jobs/{job['id']}/applied?lang=en"
    assert stored(api, employer) == []


class Limited:
    def hit(self, key: str) -> int | None:
        return 42


def test_rate_limited_form_is_a_429_page_with_retry_after(
    settings: Settings, sessions: sessionmaker[Session], clock: Any, api: Any, employer: Any
) -> None:
    app = create_app(settings, sessions, Collaborators(limiter=Limited()), today=clock)
    job = active_job(api, employer)
    result = pages(app).simulate_post(f"/jobs/{job['id']}/apply", **multipart(APPLICANT))
    page = assert_html(result, 429)
    assert result.headers["retry-after"] == "42"
    assert "Try again in 42 seconds" in page
    assert stored(api, employer) == []


def test_too_large_form_is_a_413_page(app: WsgiApp, api: Any, employer: Any) -> None:
    job = active_job(api, employer)
    big = multipart(APPLICANT, ("cv.txt", b"a" * (10 * 1024 * 1024)))
    page = assert_html(pages(app).simulate_post(f"/jobs/{job['id']}/apply", **big), 413)
    assert "Application too large" in page


def test_a_form_of_more_parts_than_it_has_is_a_400_page(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    # C8/C1: refused at the part over the count, answered like any form that cannot be read.
    job = active_job(api, employer)
    form = multipart(APPLICANT)
    filler = f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n"
    form["body"] = filler.encode() * forms.MAX_PARTS + form["body"]
    page = assert_html(pages(app).simulate_post(f"/jobs/{job['id']}/apply", **form), 400)
    assert "The form could not be read" in page
    assert stored(api, employer) == []


def test_a_form_field_that_is_not_utf_8_is_a_400_page(
    app: WsgiApp, api: Any, employer: Any
) -> None:
    # C8/C1: neither a 500 nor a name stored with U+FFFD for the bytes sent.
    job = active_job(api, employer)
    form = multipart({k: v for k, v in APPLICANT.items() if k != "name"})
    name = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'.encode()
    form["body"] = name + b"Ad\xff\xfea\r\n" + form["body"]
    page = assert_html(pages(app).simulate_post(f"/jobs/{job['id']}/apply", **form), 400)
    assert "The form could not be read" in page
    assert stored(api, employer) == []


def test_thank_you_page_names_only_public_jobs(app: WsgiApp, api: Any, employer: Any) -> None:
    draft = create_job(api, employer, title="Secret Project Baker")
    client = pages(app)
    page = assert_html(client.simulate_get(f"/jobs/{draft['id']}/applied"), 200)
    assert "Thank you" in page and "Secret Project" not in page
    assert_html(client.simulate_get("/jobs/abc/applied"), 404)
