"""HTML of the public pages (C8, C13): Jinja2 templates in api/templates, autoescaped.

Every value a template shows is escaped, except two pieces that are markup by construction:
the description, cleaned again by nh3 with the C4 allow-list (adding `rel` to links), and the
JSON-LD, whose `<`, `>` and `&` are `\\u` escapes. Strings come from the gettext catalogs and
dates and money from Babel (`models.core.i18n`). One inline stylesheet, allowed by its hash in the
Content-Security-Policy; no external assets.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from markupsafe import Markup

from api.representations import number
from models.core import i18n
from models.core.i18n import N_, Language
from models.db.entities import Job
from models.jobs import questions, workplace
from models.jobs.html import with_link_rel
from models.reference.lists import URL_ROUTE

CONFIDENTIAL = N_("Confidential employer")
LINK_REL = "nofollow noopener noreferrer"
# The salary's period as words follow the amount: "$25.50 an hour", "25,50 $ de l’heure".
PER_PERIOD = {
    1: N_("a year"),
    2: N_("a month"),
    3: N_("a week"),
    4: N_("a day"),
    5: N_("an hour"),
}
SCHEMA_UNIT = {1: "YEAR", 2: "MONTH", 3: "WEEK", 4: "DAY", 5: "HOUR"}
EMPLOYMENT_TYPE = {1: "FULL_TIME", 2: "PART_TIME", 3: "CONTRACTOR", 4: "TEMPORARY", 5: "VOLUNTEER"}
# C13 Pay transparency: the public page's statements, when the employer made them.
AI_STATEMENTS = {
    True: N_(
        "This employer uses artificial intelligence to screen, assess or select applicants "
        "for this job."
    ),
    False: N_(
        "This employer does not use artificial intelligence to screen, assess or select "
        "applicants for this job."
    ),
}
VACANCY_STATEMENTS = {
    True: N_("This posting is for an existing vacancy."),
    False: N_("This posting is not for an existing vacancy."),
}
WORKPLACE_WORDS = workplace.WORDS  # C16: where the job is done, as the page says it
CANADA = N_("Canada")
SITE_NAME = "jobpost"  # names the job's `identifier` in JSON-LD (its value is the job id)
RESUME_TYPES = ".pdf,.doc,.docx,.odt,.rtf,.txt"
REGIONS = ("Province", "Territory")  # places whose name is translated (cities keep theirs)

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
    "input,textarea,select{display:block;width:100%;font:inherit;padding:.6rem;margin-top:.25rem;"
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
    "fieldset{border:0;padding:0;margin:1rem 0 0}legend{font-weight:600}"
    ".choice{font-weight:400;margin-top:.25rem}"
    ".choice input{display:inline;width:auto;margin:0 .5rem 0 0}"
    ".statements,.report{border-top:1px solid #ddd;margin-top:1.5rem;padding-top:.5rem}"
    ".switch{text-align:right;margin:0}"
    ".results-list{list-style:none;padding:0;margin:0}"
    ".results-list li{border-top:1px solid #ddd;padding:.5rem 0 1rem}"
    ".results-list h3{font-size:1.1rem;margin:.5rem 0}"
    ".paging{margin-top:1.5rem;display:flex;gap:1rem;flex-wrap:wrap}"
    "a:focus,input:focus,select:focus,.button:focus{outline:3px solid #1b1b1b;outline-offset:2px}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
    "img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"
)


# --- words ---------------------------------------------------------------------------------


class Pay(Protocol):
    """A job's salary, as a `Job` or a feed's `OpenJob` holds it."""

    @property
    def salary_amount(self) -> Decimal | None: ...
    @property
    def salary_max(self) -> Decimal | None: ...
    @property
    def salary_period_id(self) -> int | None: ...
    @property
    def salary_commission(self) -> bool: ...


class Texts(Protocol):
    """A job's title and description in its language and their translation (C13)."""

    @property
    def language(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def translation_title(self) -> str | None: ...
    @property
    def translation_description(self) -> str | None: ...


def salary_words(job: Pay, lang: Language) -> str | None:
    """The salary in words (C8, C13), None when the job states none.

    An amount alone is the salary ("$25.50 an hour"); with a higher maximum it is a range
    ("$60,000–$70,000 a year", "60 000 $ à 70 000 $ par année"); a maximum equal to the amount
    is one figure. Commission adds ", plus commission"; with no pay besides, it is "Commission
    only". Whole dollars show no cents; amounts follow the locale (Babel).
    """
    if job.salary_amount is None or job.salary_period_id is None:
        return None
    if job.salary_commission and not _pays(job):
        return lang.gettext("Commission only")
    words = lang.money(job.salary_amount)
    if job.salary_max is not None and job.salary_max != job.salary_amount:
        low, high = words, lang.money(job.salary_max)
        words = lang.gettext("%(low)s–%(high)s") % {"low": low, "high": high}
    period = PER_PERIOD.get(job.salary_period_id)
    if period:
        words = lang.gettext("%(amount)s %(period)s") % {
            "amount": words,
            "period": lang.gettext(period),
        }
    return words + (lang.gettext(", plus commission") if job.salary_commission else "")


def _pays(job: Pay) -> bool:
    """Whether the salary names any pay above zero (commission aside)."""
    return bool(job.salary_amount) or bool(job.salary_max)


def employer_name(job: Job, lang: Language) -> str:
    """The name applicants see: hidden when the job is confidential (C2, C8)."""
    return lang.gettext(CONFIDENTIAL) if job.confidential else job.employer.name


def description_html(stored: str) -> Markup:
    """The stored description with `rel` on its links, added at render time only (C4, C8):
    markup cleaned by nh3 with the C4 allow-list, so the template inserts it as it is."""
    return Markup(with_link_rel(stored, LINK_REL))


@dataclass(frozen=True)
class JobText:
    """The job's title and description as a page shows them (C13): in the page's language
    when the job has it (its own or its translation), else as written, with `lang` naming
    the language of the text so readers and screen readers know."""

    title: str
    stored: str  # the description as stored, without the `rel` the page adds
    lang: str | None

    @property
    def description(self) -> Markup:
        return description_html(self.stored)


def job_text(job: Texts, page: Language) -> JobText:
    if job.language == page.code:
        return JobText(job.title, job.description, None)
    if job.translation_title is not None and job.translation_description is not None:
        return JobText(job.translation_title, job.translation_description, None)
    return JobText(job.title, job.description, job.language)


def place_name(description: str, kind: str, lang: Language) -> str:
    """A location as applicants read it: a province or territory in the page's language."""
    return lang.gettext(description) if kind in REGIONS else description


# --- schema.org JobPosting ---------------------------------------------------------------


def valid_through(close: date, tz: ZoneInfo) -> str:
    """The end of the closing date in the service timezone, with its offset (C5). Where
    clocks fall back at midnight, 23:59:59 comes twice that day: the later one ends it."""
    return datetime.combine(close, time(23, 59, 59, fold=1), tzinfo=tz).isoformat()


def job_posting(job: Job, tz: ZoneInfo, text: JobText | None = None) -> dict[str, Any]:
    """schema.org JobPosting: what search engines need to list the job, in the page's text."""
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "JobPosting",
        "title": job.title if text is None else text.title,
        "description": job.description if text is None else text.stored,
        "datePosted": job.publish_date.isoformat(),
        "validThrough": valid_through(job.close_date, tz),
        # Google's recommended flag: applicants apply on this page (Email routing, C8).
        "directApply": job.routing_type != URL_ROUTE,
        # The service's id, not the employer's name, so a confidential job stays anonymous.
        "identifier": {"@type": "PropertyValue", "name": SITE_NAME, "value": str(job.id)},
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
    if job.workplace_type == workplace.REMOTE:  # Google: fully remote only (C16)
        data["jobLocationType"] = "TELECOMMUTE"
        data["applicantLocationRequirements"] = applicant_requirements(job)
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


def applicant_requirements(job: Job) -> list[dict[str, str]]:
    """Where a remote job's applicants may live, as schema.org places (C16)."""
    codes = workplace.listed(job.workplace_type, job.applicant_locations)
    if workplace.CANADA in codes:
        return [{"@type": "Country", "name": "CA"}]
    return [
        {"@type": "AdministrativeArea", "name": workplace.PROVINCE_NAMES[code]} for code in codes
    ]


def workplace_facts(job: Job, lang: Language) -> list[tuple[str, str]]:
    """The page's lines on where the job is done and whom it takes (C16): the type, and
    the applicant locations of a hybrid or remote job that names them."""
    facts = [(lang.gettext("Workplace"), lang.gettext(WORKPLACE_WORDS[job.workplace_type]))]
    codes = workplace.listed(job.workplace_type, job.applicant_locations)
    if job.workplace_type != workplace.ON_SITE and codes:
        names = [
            lang.gettext(CANADA if code == workplace.CANADA else workplace.PROVINCE_NAMES[code])
            for code in codes
        ]
        facts.append((lang.gettext("Applicants from"), lang.gettext("; ").join(names)))
    return facts


def script_json(data: Any) -> Markup:
    """JSON for a <script> data block: `<`, `>` and `&` escaped, so `</script>` cannot close it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(f'<script type="application/ld+json">{text}</script>')


# --- pages -------------------------------------------------------------------------------


@dataclass
class FormState:
    """What the applicant typed (the file is never kept) and the messages, by form field."""

    values: dict[str, str] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)  # by question id (C21)
    errors: dict[str, list[str]] = field(default_factory=dict)
    resume_dropped: bool = False
    token: str = ""  # the one-time token the form sends as its Idempotency-Key (C10)


@dataclass(frozen=True)
class Links:
    """A page's own addresses (C13): its canonical one, and its version in each language
    (`?lang=`), named by `hreflang` alternates and the link to the other language."""

    alternates: dict[str, str] = field(default_factory=dict)
    canonical: str | None = None


FORM_KEY = "idempotencyKey"  # the hidden field holding the form's one-time token
TEMPLATES = i18n.environment(Path(__file__).parent / "templates")
i18n.precompile(TEMPLATES)  # once per process, at import: no request pays for it


def render(name: str, lang: Language, links: Links, **values: Any) -> str:
    """A page of `TEMPLATES` in `lang`, with the style and the page's own addresses."""
    return i18n.render(
        TEMPLATES,
        name,
        lang,
        style=Markup(STYLE),
        alternates=links.alternates,
        canonical=links.canonical,
        **values,
    )


def _time(day: date, lang: Language) -> Markup:
    return Markup('<time datetime="{}">{}</time>').format(day.isoformat(), lang.date(day))


def job_page(
    job: Job,
    tz: ZoneInfo,
    lang: Language,
    links: Links,
    form: FormState | None = None,
    *,
    action: str,
    retention_days: int = 180,
) -> str:
    """The public job page (C8): the job, and the form (Email) or a link (URL). `action` is
    the form's address, the page's language in it so the answers keep it (C13); the form's
    privacy notice states APPLICATION_RETENTION_DAYS (`retention_days`)."""
    text = job_text(job, lang)
    # Translated as a whole: French puts a narrow no-break space before the semicolon (OQLF).
    separator = lang.gettext("; ")
    locations = separator.join(place_name(loc.description, loc.type, lang) for loc in job.locations)
    categories = ", ".join(lang.gettext(c.category.name) for c in job.job_categories)
    facts = [
        (lang.ngettext("Location", "Locations", len(job.locations)), locations),
        *workplace_facts(job, lang),
        (lang.ngettext("Category", "Categories", len(job.job_categories)), categories),
        (lang.gettext("Position"), lang.gettext(job.position_type.name)),
    ]
    salary = salary_words(job, lang)
    if salary:
        facts.append((lang.gettext("Salary"), salary))
    return render(
        "job.html",
        lang,
        links,
        job=job,
        text=text,
        employer=employer_name(job, lang),
        facts=facts,
        time=functools.partial(_time, lang=lang),
        json_ld=script_json(job_posting(job, tz, text)),
        url_route=job.routing_type == URL_ROUTE,
        form=form or FormState(),
        form_key=FORM_KEY,
        action=action,
        resume_types=RESUME_TYPES,
        statements=statements(job, lang),
        report_url=f"/jobs/{job.id}/report?lang={lang.code}",
        policy_url=f"{FRAUD_POLICY}?lang={lang.code}",
        confidential=job.confidential,
        retention_days=retention_days,
        questions=asked(job, lang),
    )


def asked(job: Job, lang: Language) -> list[dict[str, Any]]:
    """The job's screening questions as the form asks them (C21): in the page's language
    when the job has it (its own, or the translation given), else in the job's."""
    own = job.language == lang.code

    def words(item: dict[str, Any]) -> str:
        other = item.get("translation")
        return str(item["text"] if own or other is None else other)

    shown = []
    for q in questions.listed(job.questions):
        shown.append(
            {
                **q,
                "text": words(q),
                "choices": [(c["id"], words(c)) for c in q.get("choices", ())],
                "field": f"answers.{q['id']}",
                "anchor": f"q-{q['id']}",
            }
        )
    return shown


def statements(job: Job, lang: Language) -> list[str]:
    """The AI and vacancy statements the job makes (C13), in the page's language."""
    said = []
    if job.ai_screening is not None:
        said.append(lang.gettext(AI_STATEMENTS[job.ai_screening]))
    if job.existing_vacancy is not None:
        said.append(lang.gettext(VACANCY_STATEMENTS[job.existing_vacancy]))
    return said


def applied_page(job: Job | None, lang: Language, links: Links, *, back: str) -> str:
    """The thank-you page; it names the job only while the job is public."""
    title = None
    if job is not None:
        text = job_text(job, lang)
        title = Markup("{}").format(text.title)
        if text.lang:  # the job's own text, in another language than the page's (C13)
            title = Markup('<span lang="{}">{}</span>').format(text.lang, text.title)
    return render("applied.html", lang, links, job=job, title=title, back=back)


def apply_elsewhere_page(job: Job, url: str, lang: Language, links: Links) -> str:
    return render("apply_elsewhere.html", lang, links, text=job_text(job, lang), url=url)


FRAUD_POLICY = "/policies/job-fraud"
PRIVACY_POLICY = "/policies/privacy"
# The report form's reasons (models.reports.REASONS) in words.
REASON_WORDS = {
    "scam": N_("A scam (it asks for money or personal details, or the job is not real)"),
    "misleading": N_("Misleading (the pay, the employer or the job are not as described)"),
    "discriminatory": N_("Discriminatory"),
    "other": N_("Another problem"),
}


@dataclass(frozen=True)
class ReportPage:
    """The report form's page: the job it is about, its address, and what was typed."""

    job: Job
    action: str
    form: FormState
    max_details: int


def report_page(page: ReportPage, lang: Language, links: Links) -> str:
    job = page.job
    return render(
        "report.html",
        lang,
        links,
        text=job_text(job, lang),
        employer=employer_name(job, lang),
        back=f"/jobs/{job.id}?lang={lang.code}",
        policy=f"{FRAUD_POLICY}?lang={lang.code}",
        reasons=[(value, lang.gettext(words)) for value, words in REASON_WORDS.items()],
        form=page.form,
        form_key=FORM_KEY,
        action=page.action,
        max_details=page.max_details,
    )


def reported_page(lang: Language, links: Links, *, days: int, back: str | None) -> str:
    policy = f"{FRAUD_POLICY}?lang={lang.code}"
    return render("reported.html", lang, links, days=days, policy=policy, back=back)


def fraud_policy_page(lang: Language, links: Links, *, days: int) -> str:
    privacy = f"{PRIVACY_POLICY}?lang={lang.code}"
    return render("policy_fraud.html", lang, links, days=days, privacy=privacy)


def privacy_policy_page(
    lang: Language, links: Links, *, contact: str | None, mail_from: str, retention: int
) -> str:
    return render(
        "policy_privacy.html",
        lang,
        links,
        contact=contact,
        mail_from=mail_from,
        retention=retention,
    )


def error_page(
    heading: str, message: str, lang: Language, links: Links, *, back: str | None = None
) -> str:
    """An error in words, already in `lang`; `back` links to a page the applicant can return to."""
    return render("message.html", lang, links, heading=heading, message=message, back=back)


def search_page(lang: Language, links: Links, **values: Any) -> str:
    """The search page (C17): the form, and the results or what went wrong."""
    return render("search.html", lang, links, **values)


def published_on(day: date, lang: Language) -> Markup:
    """A date as the pages write it, in a `time` element."""
    return _time(day, lang)
