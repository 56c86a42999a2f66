"""HTML of the public pages (C8): plain f-strings, no template engine.

Every interpolated value passes through `esc` (html.escape, quotes included). Two pieces are
markup by construction and inserted as they are: the description, cleaned again by nh3 with the
C4 allow-list (adding `rel` to links), and the JSON-LD, whose `<`, `>` and `&` are `\\u` escapes.
One inline stylesheet, allowed by its hash in the Content-Security-Policy; no external assets.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

from api.representations import number
from models.entities import Job
from models.html import with_link_rel
from models.reference import URL_ROUTE

CONFIDENTIAL = "Confidential employer"
LINK_REL = "nofollow noopener noreferrer"
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
PER_PERIOD = {1: "a year", 2: "a month", 3: "a week", 4: "a day", 5: "an hour"}
SCHEMA_UNIT = {1: "YEAR", 2: "MONTH", 3: "WEEK", 4: "DAY", 5: "HOUR"}
EMPLOYMENT_TYPE = {1: "FULL_TIME", 2: "PART_TIME", 3: "CONTRACTOR", 4: "TEMPORARY", 5: "VOLUNTEER"}
RESUME_TYPES = ".pdf,.doc,.docx,.odt,.rtf,.txt"

# `main` wraps words anywhere: a title, an employer name or a link of any length fits a
# 360 px phone without horizontal scrolling.
STYLE = (
    "*{box-sizing:border-box}"
    "body{margin:0;font:1rem/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
    "color:#1b1b1b;background:#fff}"
    "main{max-width:42rem;margin:0 auto;padding:1rem 1rem 3rem;overflow-wrap:anywhere}"
    "h1{font-size:1.6rem;line-height:1.25;margin:.5rem 0 .25rem}"
    "h2{font-size:1.25rem;margin:1.5rem 0 .5rem}"
    ".employer{font-weight:600;margin:0 0 1rem}"
    ".facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0}"
    ".facts dt{color:#555}.facts dd{margin:0}"
    ".description,#apply{border-top:1px solid #ddd;margin-top:1.5rem}"
    "a{color:#0b57d0}"
    "label{display:block;font-weight:600;margin-top:1rem}"
    "input,textarea{display:block;width:100%;font:inherit;padding:.6rem;margin-top:.25rem;"
    "border:1px solid #888;border-radius:.4rem;background:#fff;color:inherit}"
    "textarea{min-height:10rem}"
    ".button{display:inline-block;margin-top:1.25rem;padding:.75rem 1.5rem;font:inherit;"
    "font-weight:600;color:#fff;background:#0b57d0;border:0;border-radius:.4rem;"
    "text-decoration:none;cursor:pointer}"
    ".optional,.hint{font-weight:400;color:#555}.hint{font-size:.9rem;margin:.25rem 0 0}"
    ".error{color:#b3261e;font-weight:600;margin:.25rem 0 0}"
    "[aria-invalid=true]{border:2px solid #b3261e}"
    ".summary{border:2px solid #b3261e;border-radius:.4rem;padding:.5rem 1rem;margin:1rem 0}"
    ".hp{display:none}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
    "img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"
)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def layout(title: str, body: str, *, head: str = "") -> str:
    """The one base layout: `body` and `head` are markup built in this module."""
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'  # no favicon request
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n{head}</head>\n"
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


# --- words ---------------------------------------------------------------------------------


def date_words(day: date) -> str:
    """'9 May 2026': day, month name, year, the same in every locale."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def money(amount: Decimal) -> str:
    """'$60,000', or '$25.50' when there are cents."""
    return f"${amount:,.0f}" if amount == amount.to_integral_value() else f"${amount:,.2f}"


def salary_words(job: Job) -> str | None:
    """The salary in words (C8), None when the job states none.

    An amount alone is the salary ("$25.50 an hour"); with a higher maximum it is a range
    with an en dash ("$60,000–$70,000 a year"); a maximum equal to the amount is one figure.
    Commission adds ", plus commission"; with no pay besides, it is "Commission only". Whole
    dollars show no cents.
    """
    if job.salary_amount is None or job.salary_period_id is None:
        return None
    if job.salary_commission and not _pays(job):
        return "Commission only"
    words = money(job.salary_amount)
    if job.salary_max is not None and job.salary_max != job.salary_amount:
        words += "–" + money(job.salary_max)
    words += " " + PER_PERIOD.get(job.salary_period_id, "")
    return words.rstrip() + (", plus commission" if job.salary_commission else "")


def _pays(job: Job) -> bool:
    """Whether the salary names any pay above zero (commission aside)."""
    return bool(job.salary_amount) or bool(job.salary_max)


def employer_name(job: Job) -> str:
    """The name applicants see: hidden when the job is confidential (C2, C8)."""
    return CONFIDENTIAL if job.confidential else job.employer.name


def description_html(stored: str) -> str:
    """The stored description with `rel` on its links, added at render time only (C4, C8)."""
    return with_link_rel(stored, LINK_REL)


# --- schema.org JobPosting ---------------------------------------------------------------


def valid_through(close: date, tz: ZoneInfo) -> str:
    """The end of the closing date in the service timezone, with its offset (C5). Where
    clocks fall back at midnight, 23:59:59 comes twice that day: the later one ends it."""
    return datetime.combine(close, time(23, 59, 59, fold=1), tzinfo=tz).isoformat()


def job_posting(job: Job, tz: ZoneInfo) -> dict[str, Any]:
    """schema.org JobPosting: what search engines need to list the job."""
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "JobPosting",
        "title": job.title,
        "description": job.description,
        "datePosted": job.publish_date.isoformat(),
        "validThrough": valid_through(job.close_date, tz),
        # Google's recommended flag: applicants apply on this page (Email routing, C8).
        "directApply": job.routing_type != URL_ROUTE,
    }
    if not job.confidential:
        data["hiringOrganization"] = {"@type": "Organization", "name": job.employer.name}
    places = []
    for loc in job.locations:
        address = {
            "@type": "PostalAddress",
            "addressRegion": loc.province_code,
            "addressCountry": "CA",
        }
        if loc.type == "City":
            address["addressLocality"] = loc.name
        places.append({"@type": "Place", "address": address})
    data["jobLocation"] = places
    if job.position_type_id in EMPLOYMENT_TYPE:
        data["employmentType"] = EMPLOYMENT_TYPE[job.position_type_id]
    # A salary of $0 (commission only, say) is no base salary: search engines would list it.
    if job.salary_amount is not None and job.salary_period_id in SCHEMA_UNIT and _pays(job):
        value: dict[str, Any] = {
            "@type": "QuantitativeValue",
            "unitText": SCHEMA_UNIT[job.salary_period_id],
        }
        if job.salary_max is not None and job.salary_max != job.salary_amount:
            value["minValue"] = number(job.salary_amount)
            value["maxValue"] = number(job.salary_max)
        else:
            value["value"] = number(job.salary_amount)
        data["baseSalary"] = {"@type": "MonetaryAmount", "currency": "CAD", "value": value}
    return data


def script_json(data: Any) -> str:
    """JSON for a <script> data block: `<`, `>` and `&` escaped, so `</script>` cannot close it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/ld+json">{text}</script>\n'


# --- pages -------------------------------------------------------------------------------


@dataclass
class FormState:
    """What the applicant typed (the file is never kept) and the messages, by form field."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    resume_dropped: bool = False
    token: str = ""  # the one-time token the form sends as its Idempotency-Key (C10)


def job_page(
    job: Job, tz: ZoneInfo, form: FormState | None = None, *, canonical: str | None = None
) -> str:
    """The public job page (C8): the job, and the form (Email) or a link (URL). `canonical`:
    the page's one address (`/jobs/01` and `/jobs/1/` serve it too), for search engines."""
    locations = "; ".join(loc.description for loc in job.locations)
    facts = [
        ("Location" if len(job.locations) == 1 else "Locations", locations),
        ("Position", job.position_type.name),
    ]
    salary = salary_words(job)
    if salary:
        facts.append(("Salary", salary))
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    body = (
        f"<article>\n<h1>{esc(job.title)}</h1>\n"
        f'<p class="employer">{esc(employer_name(job))}</p>\n'
        f'<dl class="facts">{rows}</dl>\n'
        f'<p>Posted <time datetime="{esc(job.publish_date.isoformat())}">'
        f"{esc(date_words(job.publish_date))}</time> · Closes "
        f'<time datetime="{esc(job.close_date.isoformat())}">'
        f"{esc(date_words(job.close_date))}</time></p>\n"
        f'<section class="description">\n<h2>About the job</h2>\n'
        f"{description_html(job.description)}\n</section>\n"
        f"{apply_section(job, form or FormState())}</article>\n"
    )
    title = f"{job.title} · {employer_name(job)}"
    head = f'<link rel="canonical" href="{esc(canonical)}">\n' if canonical else ""
    return layout(title, body, head=head + script_json(job_posting(job, tz)))


def apply_section(job: Job, form: FormState) -> str:
    if job.routing_type == URL_ROUTE:
        link = ""
        if job.application_url:
            link = (
                f'<p><a class="button" href="{esc(job.application_url)}" '
                f'rel="nofollow noopener">Apply on the employer’s site</a></p>\n'
            )
        return (
            '<section id="apply">\n<h2>How to apply</h2>\n'
            f"<p>This employer takes applications on its own site.</p>\n{link}</section>\n"
        )
    return f'<section id="apply">\n<h2>Apply</h2>\n{application_form(job.id, form)}</section>\n'


# Not type="email": browsers refuse an address whose local part is outside ASCII
# ("zoë@exemple.ca"), which the service takes (C8); inputmode keeps the phone's email keyboard.
EMAIL_INPUT = {
    "inputmode": "email",
    "autocomplete": "email",
    "autocapitalize": "none",
    "spellcheck": "false",
    "required": "",
    "maxlength": "254",
}
FIELDS: tuple[tuple[str, str, dict[str, str]], ...] = (
    # (name, label, attributes of the input); "" makes a boolean attribute
    ("name", "Name", {"autocomplete": "name", "required": "", "maxlength": "100"}),
    ("email", "Email", EMAIL_INPUT),
    ("phone", "Phone", {"type": "tel", "autocomplete": "tel", "maxlength": "30"}),
)


FORM_KEY = "idempotencyKey"  # the hidden field holding the form's one-time token
TOKEN_INPUT = {"type": "hidden", "name": FORM_KEY}


def attributes(pairs: dict[str, str]) -> str:
    """` name="value"` for each pair, every name and value escaped."""
    return "".join(f' {esc(k)}="{esc(v)}"' for k, v in pairs.items())


def _field(
    name: str, label: str, form: FormState, *, optional: bool
) -> tuple[str, dict[str, str], str]:
    """A field's label, its id/name (and invalid-marking) attributes, and its message."""
    extra = ' <span class="optional">(optional)</span>' if optional else ""
    label_html = f'<label for="{esc(name)}">{esc(label)}{extra}</label>\n'
    attrs = {"id": name, "name": name}
    messages = form.errors.get(name)
    if not messages:
        return label_html, attrs, ""
    attrs |= {"aria-invalid": "true", "aria-describedby": f"{name}-error"}
    text = f'<p class="error" id="{esc(name)}-error">{esc(" ".join(messages))}</p>\n'
    return label_html, attrs, text


def application_form(job_id: int, form: FormState) -> str:
    """The C8 form: name, email, phone, cover letter, résumé, and the `website` honeypot."""
    parts = []
    if form.errors:
        n = len(form.errors)
        fix = f"{n} field needs" if n == 1 else f"{n} fields need"
        # Focused on load, without JavaScript: the page opens here, not at the job's title.
        parts.append(
            '<div class="summary" role="alert" tabindex="-1" autofocus><p>Your application '
            f"was not sent: {esc(fix)} fixing below.</p></div>\n"
        )
    action = attributes(
        {"method": "post", "action": f"/jobs/{job_id}/apply", "enctype": "multipart/form-data"}
    )
    parts.append(f"<form{action}>\n")
    if form.token:  # sent as the form's Idempotency-Key: a double submit applies once (C10)
        parts.append(f"<input{attributes(TOKEN_INPUT | {'value': form.token})}>\n")
    for name, text, extra in FIELDS:
        label, attrs, message = _field(name, text, form, optional=name == "phone")
        value = {"value": form.values.get(name, "")}
        parts.append(f"{label}<input{attributes(attrs | extra | value)}>\n{message}")
    label, attrs, message = _field("coverLetter", "Cover letter", form, optional=True)
    attrs |= {"rows": "8", "maxlength": "10000"}
    letter = esc(form.values.get("coverLetter", ""))
    parts.append(f"{label}<textarea{attributes(attrs)}>{letter}</textarea>\n{message}")
    label, attrs, message = _field("resume", "Résumé", form, optional=True)
    attrs |= {"type": "file", "accept": RESUME_TYPES}
    if form.resume_dropped:  # the file was fine (else `message`), but it is not kept
        attrs["aria-describedby"] = "resume-again"
        message = (
            '<p class="error" id="resume-again">Please choose your résumé again: files are '
            "not kept when the form is sent back.</p>\n"
        )
    parts.append(f"{label}<input{attributes(attrs)}>\n{message}")
    parts.append(
        '<p class="hint">PDF, Word, OpenDocument, RTF or plain text; at most 5 MB.</p>\n'
        '<div class="hp"><label for="website">Leave this field empty</label>'
        '<input id="website" name="website" tabindex="-1" autocomplete="off"></div>\n'
        '<button class="button" type="submit">Send application</button>\n</form>\n'
    )
    return "".join(parts)


def applied_page(job: Job | None) -> str:
    """The thank-you page; it names the job only while the job is public."""
    about = ""
    if job is not None:
        about = f" for <strong>{esc(job.title)}</strong>"
    body = (
        "<h1>Thank you</h1>\n"
        f"<p>Your application{about} has been received and is on its way to the employer.</p>\n"
    )
    if job is not None:
        body += f'<p><a href="/jobs/{esc(job.id)}">Back to the job</a></p>\n'
    return layout("Application received", body)


def apply_elsewhere_page(job: Job, url: str) -> str:
    body = (
        f"<h1>{esc(job.title)}</h1>\n<p>This employer takes applications on its own site.</p>\n"
        f'<p><a class="button" href="{esc(url)}" rel="nofollow noopener">'
        "Apply on the employer’s site</a></p>\n"
    )
    return layout(f"Apply · {job.title}", body)


def error_page(heading: str, message: str, *, back: str | None = None) -> str:
    """An error in words; `back` links to a page the applicant can return to."""
    body = f"<h1>{esc(heading)}</h1>\n<p>{esc(message)}</p>\n"
    if back:
        body += f'<p><a href="{esc(back)}">Go back</a></p>\n'
    return layout(heading, body)
