"""The applicant's HTML pages (C8): the public job page, the apply redirect, the form, thanks.

The form goes through `Intake.receive`, the same steps as the API (C1 order, rules, outbox and
enqueueing); only the answers differ: HTML pages and redirects instead of problem JSON. Every
page is in English or French (C13, `api.languages`), and the form's address carries the
language, so its errors, its 303 and the thank-you page keep it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import falcon
from sqlalchemy.orm import Session

from api import cache, forms, html_render, idempotency, languages
from api import errors as problems
from api.applications import Intake, job_scope
from api.responses import path_id
from models import reports
from models.applications.service import Upload, elsewhere
from models.core.errors import ApplyViaUrl, FieldError, JobGone, NotFound, ValidationFailed
from models.core.i18n import N_, Language, language
from models.db.entities import Job
from models.idempotency import Busy, Scope
from models.jobs.public import public_state

HTML = "text/html; charset=utf-8"
SECURITY_HEADERS = {
    "Content-Security-Policy": html_render.CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
}
TEXT_FIELDS = ("name", "email", "phone", "coverLetter")
# Messages for a screening question's answer (C21), by C1 entry code; shown under the question.
ANSWER_MESSAGES = {
    "required": N_("Please answer this question."),
    "invalid_type": N_("Please answer with one of the choices, or a number where one is asked."),
    "unknown_choice": N_("Please choose one of the answers given."),
    "duplicate": N_("Please choose each answer once."),
    "out_of_range": N_("Please enter a number within the range given."),
    "too_long": N_("Your answer is too long."),
}
# Messages for people, by (form field, C1 entry code); other entries get FALLBACK.
MESSAGES = {
    ("name", "required"): N_("Please enter your name."),
    ("name", "too_long"): N_("Your name can have at most 100 characters."),
    ("email", "required"): N_("Please enter your email address."),
    ("email", "invalid_format"): N_("Please enter a valid email address, like name@example.com."),
    ("email", "too_long"): N_("An email address has at most 254 characters."),
    ("phone", "invalid_format"): N_("A phone number has only digits, spaces and + - ( ) ."),
    ("phone", "too_long"): N_("A phone number has at most 30 characters."),
    ("coverLetter", "too_long"): N_("Your cover letter can have at most 10,000 characters."),
    ("resume", "file_too_large"): N_("Your résumé must be at most 5 MB."),
    ("resume", "file_type_not_allowed"): N_(
        "Your résumé must be a PDF, Word (DOC, DOCX), OpenDocument (ODT), RTF or text file."
    ),
}
FALLBACK = N_("Please check this field.")


def send_html(resp: falcon.Response, page: str | bytes, lang: Language, status: int = 200) -> None:
    """A page, with the language it is in; it may differ by Accept-Language (C13)."""
    resp.status = status
    if isinstance(page, bytes):
        resp.data = page
    else:
        resp.text = page
    resp.content_type = HTML
    resp.set_headers(SECURITY_HEADERS)
    resp.set_header("Content-Language", lang.tag)
    resp.append_header("Vary", "Accept-Language")


def page_language(req: falcon.Request, job: Job | None = None) -> Language:
    return language(languages.choose(req, job.language if job is not None else None))


def links(req: falcon.Request, base: str = "") -> html_render.Links:
    """The page's address in each language (`?lang=`), absolute when `base` is given."""
    return html_render.Links({code: f"{base}{req.path}?lang={code}" for code in ("en", "fr")})


PAGES = (
    "/jobs/",
    "/policies/",
    "/alerts/",
    "/applications/",
)  # the public pages; the API lives under /api/
SEARCH_PAGES = ("/", "/jobs")  # the search page (C17), at these two paths exactly


def serialize_error(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError) -> None:
    """An error the pages did not answer themselves (the database away, a bug, a method
    they lack) is a page there too, and a problem everywhere else (C1)."""
    if not req.path.startswith(PAGES) and req.path not in SEARCH_PAGES:
        problems.serialize(req, resp, error)
        return
    status = error.status_code
    lang = page_language(req)
    _ = lang.gettext
    if status == 503:
        heading, message = _("Temporarily unavailable"), _("Please try again in a minute.")
    elif status >= 500:
        heading = _("Something went wrong")
        reference = getattr(req.context, "request_id", "-")
        message = _("Please try again later. Reference: %(reference)s.") % {"reference": reference}
    elif status == 404:
        send_not_found(req, resp)
        return
    else:
        heading = _("This request could not be answered")
        message = _("Please go back to the job and try again.")
    send_html(resp, html_render.error_page(heading, message, lang, links(req)), lang, status)


def send_gone(req: falcon.Request, resp: falcon.Response) -> None:
    """410: the job was taken down after a fraud report (C13)."""
    lang = page_language(req)
    page = html_render.error_page(
        lang.gettext("Job removed"),
        lang.gettext("This job was removed after a review of a report about it."),
        lang,
        links(req),
    )
    send_html(resp, page, lang, 410)


def send_missing(req: falcon.Request, resp: falcon.Response, raw_id: str) -> None:
    """The page of a job that is not public: 410 when it was taken down, else 404."""
    try:
        job_id = path_id(raw_id)
    except NotFound:
        job_id = None
    if job_id is not None and reports.taken_down(req.context.db.session, job_id):
        send_gone(req, resp)
    else:
        send_not_found(req, resp)


def send_not_found(req: falcon.Request, resp: falcon.Response) -> None:
    lang = page_language(req)
    page = html_render.error_page(
        lang.gettext("Job not found"),
        lang.gettext("This job does not exist or is no longer open for applications."),
        lang,
        links(req),
    )
    send_html(resp, page, lang, 404)


def public_job(session: Session, raw_id: str) -> Job | None:
    """The job applicants may see: active only (C8); drafts, archived and unknown are None."""
    try:
        job_id = path_id(raw_id)
    except NotFound:
        return None
    job = session.get(Job, job_id)
    return job if job is not None and job.status == "active" else None


PageKey = tuple[int, str, str]  # a kept job page: job id, language, the site's address
# Stands for the form's one-time token in a kept page: each answer gets its own token. Random
# per process, so no job's text can hold it.
TOKEN_MARK = "token-" + secrets.token_hex(16)
_MARK = TOKEN_MARK.encode()


class JobPage:
    """GET /jobs/{id}: the job in HTML with JSON-LD, and its apply section (C8), in English
    or French (C13). A rendered page is kept per process (`api.cache`) and served while the
    job's version and its employer's name hold: rendering costs a few ORM queries and the
    templates, the check one statement."""

    def __init__(
        self,
        timezone: ZoneInfo,
        public_base_url: str,
        kept: cache.Representations[PageKey] | None = None,
        *,
        retention_days: int = 180,
    ) -> None:
        self.timezone, self.public_base_url = timezone, public_base_url
        self.retention_days = retention_days  # stated by the form's privacy notice (C13)
        self.kept = kept if kept is not None else cache.Representations[PageKey](0)

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        try:
            number = path_id(job_id)
        except NotFound:
            send_not_found(req, resp)
            return
        session = req.context.db.session
        state = public_state(session.connection(), number)
        if state is None:
            send_missing(req, resp, job_id)
            return
        lang = language(languages.choose(req, state.language))
        base = self.public_base_url
        key = (number, lang.code, base)
        entry = self.kept.get(key, state.version, state.employer_name)
        if entry is None:
            job = public_job(session, job_id)
            if job is None:  # taken out of view since the statement above
                send_not_found(req, resp)
                return
            page = self._render(job, lang, base)
            entry = self.kept.put(key, state.version, state.employer_name, page.encode())
        body = entry.body
        if _MARK in body:  # the form (Email routing): its token is this visitor's alone
            body = body.replace(_MARK, new_token().encode(), 1)
            resp.set_header("Cache-Control", "private, no-cache")  # no shared cache keeps it
        send_html(resp, body, lang)

    def _render(self, job: Job, lang: Language, base: str) -> str:
        # The page's one address (`/jobs/01` and `/jobs/1/` serve it too), for search engines,
        # with its language: each language's page is its own (C13).
        page_links = html_render.Links(
            {code: page_url(base, job.id, code) for code in ("en", "fr")},
            page_url(base, job.id, lang.code),
        )
        form = html_render.FormState(token=TOKEN_MARK)
        return html_render.job_page(
            job,
            self.timezone,
            lang,
            page_links,
            form,
            action=form_action(job.id, lang),
            retention_days=self.retention_days,
        )


def page_url(base: str, job_id: int, code: str) -> str:
    """The job page's one address in a language (C13): its canonical link, and wherever else
    the page is named."""
    return f"{base}/jobs/{job_id}?lang={code}"


def form_action(job_id: int, lang: Language) -> str:
    return f"/jobs/{job_id}/apply?lang={lang.code}"


def new_token() -> str:
    """The form's one-time token, its Idempotency-Key (C10): 22 random URL-safe characters."""
    return secrets.token_urlsafe(16)


class ApplyRedirect:
    """GET /jobs/{id}/apply: 302 to applicationUrl (URL routing) or to the form (C8)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        job = public_job(req.context.db.session, job_id)
        if job is None:
            send_missing(req, resp, job_id)
            return
        resp.status = 302
        chosen = languages.from_query(req)  # kept for the form's page (C13)
        own = f"/jobs/{job.id}" + (f"?lang={chosen}" if chosen else "") + "#apply"
        resp.location = elsewhere(job) or own


class ApplyForm(ApplyRedirect):
    """POST /jobs/{id}/apply (multipart): 303 to the thank-you page, or the form again (C8).

    A filled honeypot gets the same 303, with nothing stored. A job that takes applications
    by URL gets a page with the link, not a redirect: `form-action 'self'` would block it.
    """

    def __init__(self, intake: Intake, timezone: ZoneInfo, *, retention_days: int = 180) -> None:
        self.intake, self.timezone, self.retention_days = intake, timezone, retention_days

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        fields: dict[str, Any] = {}
        try:
            fields = self._read(req)
            if self._answered_by_key(req, resp, job_id, fields):
                return
            self.intake.check_rate(req)
            self.intake.store(req, job_id, fields)
        except ValidationFailed as e:
            self._invalid(req, resp, job_id, fields, e.errors)
            return
        except ApplyViaUrl as e:
            job = public_job(req.context.db.session, job_id)
            if job is None:  # unreachable: Intake found the job
                send_not_found(req, resp)
                return
            lang = page_language(req, job)
            page = html_render.apply_elsewhere_page(job, e.url, lang, links(req))
            send_html(resp, page, lang, 409)
            return
        except NotFound:
            send_not_found(req, resp)
            return
        except JobGone:
            send_gone(req, resp)
            return
        except falcon.HTTPError as e:
            send_error(req, resp, e, job_id)
            return
        resp.status = 303
        lang = page_language(req)
        resp.location = f"/jobs/{path_id(job_id)}/applied?lang={lang.code}"
        idempotency.finish(req, resp)

    def _read(self, req: falcon.Request) -> dict[str, Any]:
        """413 and 415, then the fields (400). C1 puts 429 before a 400, so an unreadable body
        counts against the rate first; a readable one is counted after the key's answers."""
        kind, data = forms.read_raw(req)
        try:
            return forms.parse(req, kind, data)
        except falcon.HTTPError:
            self.intake.check_rate(req)
            raise

    def _answered_by_key(
        self, req: falcon.Request, resp: falcon.Response, job_id: str, fields: dict[str, Any]
    ) -> bool:
        """The form's hidden token is its Idempotency-Key (C10): a submit sent twice makes
        one application, and the second is answered the first's 303. True when the key
        answered (the replay, or a page saying why not); False when the form is processed."""
        token = fields.get(html_render.FORM_KEY)
        scope = job_scope(job_id)
        if token is None or scope is None or idempotency.dry_run(req):
            return False
        idempotency.check_key(token if isinstance(token, str) else "")
        lang = page_language(req)
        _ = lang.gettext
        busy = (
            _("Your application is being sent"),
            _(
                "This form was sent a moment ago and is still being processed; it will not "
                "apply twice. Reload this page in a moment to see the confirmation."
            ),
        )
        reused = (
            _("This form was sent already"),
            _(
                "An application was sent from this page already, with other answers. To "
                "send another, open the job again."
            ),
        )
        back = f"/jobs/{scope.id}?lang={lang.code}"
        return answered_by_form_key(
            req,
            resp,
            scope,
            token,
            "form",
            fields,
            busy,
            reused,
            back,
            before_claim=lambda: self.intake.check_rate(req),
        )

    def _invalid(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        job_id: str,
        fields: dict[str, Any],
        errors: list[FieldError],
    ) -> None:
        job = public_job(req.context.db.session, job_id)
        if job is None:  # unreachable: Intake found the job
            send_not_found(req, resp)
            return
        lang = page_language(req, job)
        token = fields.get(html_render.FORM_KEY)
        state = html_render.FormState(
            values={k: v for k in TEXT_FIELDS if isinstance(v := fields.get(k), str)},
            # The same token: the key was released, and the corrected form applies once.
            token=token if isinstance(token, str) else new_token(),
        )
        answers = fields.get("answers")
        if isinstance(answers, dict):
            state.answers = answers
        for error in errors:
            name = error.field.split(".", 1)[0]
            if name == "answers" and error.field != "answers":  # a question's own (C21)
                name = error.field
                message = lang.gettext(ANSWER_MESSAGES.get(error.code, FALLBACK))
            else:
                message = lang.gettext(MESSAGES.get((name, error.code), FALLBACK))
            state.errors.setdefault(name, []).append(message)
        state.resume_dropped = isinstance(fields.get("resume"), Upload) and (
            "resume" not in state.errors
        )
        # The form's page in the other language is the job's page (the form is POSTed).
        versions = html_render.Links({code: f"/jobs/{job.id}?lang={code}" for code in ("en", "fr")})
        page = html_render.job_page(
            job,
            self.timezone,
            lang,
            versions,
            state,
            action=form_action(job.id, lang),
            retention_days=self.retention_days,
        )
        send_html(resp, page, lang, 422)
        resp.set_header("Cache-Control", "no-store")  # the page holds the applicant's data


def send_error(
    req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError, job_id: str
) -> None:
    """413, 415, 429 and 400 of the intake as pages; Retry-After and the like are kept."""
    status = error.status_code
    lang = page_language(req)
    _ = lang.gettext
    back = None
    if job_id.isascii() and job_id.isdigit():
        back = f"/jobs/{job_id}?lang={lang.code}"
    if status == 413:
        heading = _("Application too large")
        message = _("The form, résumé included, may be at most 10 MB; a résumé at most 5 MB.")
    elif status == 429:
        heading = _("Too many applications")
        wait = _headers(error).get("Retry-After", "60")
        message = _(
            "Too many applications were sent from your network. Try again in %(seconds)s seconds."
        ) % {"seconds": wait}
    else:
        heading = _("The form could not be read")
        message = _("Please go back to the job and send the form again.")
    page = html_render.error_page(heading, message, lang, links(req), back=back)
    send_html(resp, page, lang, status)
    resp.set_headers(_headers(error))


def _headers(error: falcon.HTTPError) -> dict[str, str]:
    raw = error.headers or {}
    return dict(raw.items()) if isinstance(raw, dict) else dict(raw)


class AppliedPage:
    """GET /jobs/{id}/applied: the thank-you page; it names the job only while it is public."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        try:
            path_id(job_id)
        except NotFound:
            send_not_found(req, resp)
            return
        job = public_job(req.context.db.session, job_id)
        lang = page_language(req, job)
        back = f"/jobs/{path_id(job_id)}?lang={lang.code}"
        send_html(resp, html_render.applied_page(job, lang, links(req), back=back), lang)


def answered_by_form_key(
    req: falcon.Request,
    resp: falcon.Response,
    scope: Scope,
    token: str,
    form: str,
    fields: dict[str, Any],
    busy: tuple[str, str],
    reused: tuple[str, str],
    back: str,
    *,
    before_claim: Callable[[], None],
) -> bool:
    """A form's one-time token as its Idempotency-Key (C10): the first answer replayed, or a
    page saying why not (`busy` while in flight, 409; `reused` with other answers, 422, each a
    title and a text). True when the key answered; False when the form is to be processed.
    `before_claim` counts the form against its rate limit before the key is marked."""
    content = [form, idempotency.form_content(fields)]
    keys: idempotency.Keys = req.context.idempotency_keys
    fingerprint = idempotency.fingerprint(req, content)
    outcome = keys.begin(req, scope, token, fingerprint, before_claim=before_claim)
    lang = page_language(req)
    if outcome is Busy.IN_FLIGHT:
        page = html_render.error_page(*busy, lang, links(req), back=back)
        send_html(resp, page, lang, 409)
        resp.set_header("Retry-After", idempotency.RETRY_AFTER)
    elif outcome is Busy.REUSED:
        send_html(resp, html_render.error_page(*reused, lang, links(req), back=back), lang, 422)
    elif outcome is not None:
        idempotency.replay(resp, outcome)
    return outcome is not None
