"""The fraud report form, its thank-you page, and the policy pages (C13), in English or French.

The form takes the JSON twin's steps (`api.reports.Reports`: its rate limit bucket and its
storage); only the answers differ: pages and a 303 instead of problem JSON. Its address
carries the page's language, so its errors, its 303 and the thank-you page keep it.
"""

from __future__ import annotations

import falcon

from api import forms, html_render, idempotency
from api.body import media_type, read_bytes
from api.errors import Problem
from api.pages import (
    answered_by_form_key,
    links,
    new_token,
    page_language,
    public_job,
    send_gone,
    send_html,
    send_not_found,
)
from api.reports import REPORT_BODY_LIMIT, Reports
from api.responses import path_id
from models import reports
from models.core.errors import FieldError, JobGone, NotFound, ValidationFailed
from models.core.i18n import N_, Language
from models.core.settings import Settings
from models.db.entities import Job
from models.idempotency import Scope

FIELDS = ("reason", "details", "email")
MESSAGES = {
    ("reason", "required"): N_("Please choose a reason."),
    ("reason", "out_of_range"): N_("Please choose a reason."),
    ("details", "required"): N_("Please tell us what is wrong with this job."),
    ("details", "too_long"): N_("Please use at most 2,000 characters."),
    ("email", "invalid_format"): N_("Please enter a valid email address, like name@example.com."),
    ("email", "too_long"): N_("An email address has at most 254 characters."),
}
FALLBACK = N_("Please check this field.")


def _action(job_id: int, lang: Language) -> str:
    return f"/jobs/{job_id}/report?lang={lang.code}"


class ReportForm:
    """GET /jobs/{id}/report: the form; POST: 303 to /jobs/{id}/reported, or the form again
    (422). A filled honeypot gets the same 303, with nothing stored. Reports are taken on
    active jobs only (404 page), and a taken-down job's form is a 410 page."""

    def __init__(self, twin: Reports) -> None:
        self.twin = twin

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        job = self._job(req, resp, job_id)
        if job is not None:
            self._page(req, resp, job, html_render.FormState(token=new_token()), 200)
            resp.set_header("Cache-Control", "private, no-cache")  # its token is this visitor's

    def on_post(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        try:
            fields = self._read(req)
            if self._answered_by_key(req, resp, job_id, fields):
                return
            self.twin.check_rate(req)
        except falcon.HTTPError as e:
            _refused(req, resp, e, job_id)
            return
        job = self._job(req, resp, job_id)
        if job is None:
            return
        if not fields.get("website"):  # the honeypot: a bot is told it succeeded
            try:
                self.twin.store(req, job.id, fields)
            except ValidationFailed as e:
                self._invalid(req, resp, job, fields, e.errors)
                return
        resp.status = 303
        resp.location = f"/jobs/{job.id}/reported?lang={page_language(req, job).code}"
        idempotency.finish(req, resp)

    def _read(self, req: falcon.Request) -> dict[str, str]:
        """413, 415, then 400 (an unreadable form counts against the rate first, as C1 puts
        429 before 400): the form's text fields."""
        data = read_bytes(req, REPORT_BODY_LIMIT)
        if media_type(req) != "multipart/form-data":
            raise falcon.HTTPUnsupportedMediaType()
        try:
            parsed = forms.parse_multipart(req.content_type or "", data)
        except falcon.HTTPError:
            self.twin.check_rate(req)
            raise
        return {k: v for k, v in parsed.items() if isinstance(v, str)}

    def _answered_by_key(
        self, req: falcon.Request, resp: falcon.Response, job_id: str, fields: dict[str, str]
    ) -> bool:
        """The form's one-time token is its Idempotency-Key, as the application form's is
        (C10): a report sent twice is stored once, and the second is answered the first's
        303. Its keys are the job's reports' (scope `report`), apart from its applications'."""
        token = fields.get(html_render.FORM_KEY)
        try:
            scope = Scope("report", path_id(job_id))
        except NotFound:
            return False  # the 404 page comes next
        if token is None:
            return False
        idempotency.check_key(token)
        lang = page_language(req)
        _ = lang.gettext
        busy = (
            _("Your report is being sent"),
            _(
                "This form was sent a moment ago and is still being processed; it will not "
                "be sent twice. Reload this page in a moment to see the confirmation."
            ),
        )
        reused = (
            _("This form was sent already"),
            _("A report was sent from this page already. To send another, open the form again."),
        )
        back = f"/jobs/{scope.id}/report?lang={lang.code}"
        return answered_by_form_key(
            req,
            resp,
            scope,
            token,
            "report",
            fields,
            busy,
            reused,
            back,
            before_claim=lambda: self.twin.check_rate(req),
        )

    def _job(self, req: falcon.Request, resp: falcon.Response, raw_id: str) -> Job | None:
        """The active job reported on, or None once its 404 or 410 page is sent."""
        try:
            return reports.job_for_report(req.context.db.session, path_id(raw_id))
        except NotFound:
            send_not_found(req, resp)
        except JobGone:
            send_gone(req, resp)
        return None

    def _invalid(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        job: Job,
        fields: dict[str, str],
        errors: list[FieldError],
    ) -> None:
        lang = page_language(req, job)
        token = fields.get(html_render.FORM_KEY)
        state = html_render.FormState(
            values={k: fields[k] for k in FIELDS if k in fields},
            # The same token: the key was released, and the corrected form reports once.
            token=token or new_token(),
        )
        for error in errors:
            message = lang.gettext(MESSAGES.get((error.field, error.code), FALLBACK))
            state.errors.setdefault(error.field, []).append(message)
        self._page(req, resp, job, state, 422)
        resp.set_header("Cache-Control", "no-store")  # the page holds what was typed

    def _page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        job: Job,
        state: html_render.FormState,
        status: int,
    ) -> None:
        lang = page_language(req, job)
        versions = html_render.Links(
            {code: f"/jobs/{job.id}/report?lang={code}" for code in ("en", "fr")}
        )
        page = html_render.ReportPage(job, _action(job.id, lang), state, reports.MAX_DETAILS)
        send_html(resp, html_render.report_page(page, lang, versions), lang, status)


def _refused(
    req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError, job_id: str
) -> None:
    """413, 415, 429 and 400 of the form as pages; Retry-After is kept."""
    status = error.status_code
    lang = page_language(req)
    _ = lang.gettext
    back = (
        f"/jobs/{job_id}/report?lang={lang.code}" if job_id.isascii() and job_id.isdigit() else None
    )
    if status == 429:
        heading = _("Too many reports")
        wait = dict(error.headers or {}).get("Retry-After", "60")
        message = _(
            "Too many reports were sent from your network. Try again in %(seconds)s seconds."
        ) % {"seconds": wait}
    elif (
        status == 400
        and isinstance(error, Problem)
        and error.problem_code == "invalid_idempotency_key"
    ):
        heading = _("The form could not be read")
        message = _("Please open the form again and send it from there.")
    elif status == 413:
        heading = _("Report too long")
        message = _("Please shorten your report and send it again.")
    else:
        heading = _("The form could not be read")
        message = _("Please go back to the job and send the form again.")
    send_html(
        resp, html_render.error_page(heading, message, lang, links(req), back=back), lang, status
    )
    resp.set_headers(dict(error.headers or {}))


class Reported:
    """GET /jobs/{id}/reported: the thank-you page; it links back to the job while public."""

    def __init__(self, settings: Settings) -> None:
        self.days = settings.report_review_days

    def on_get(self, req: falcon.Request, resp: falcon.Response, job_id: str) -> None:
        try:
            path_id(job_id)
        except NotFound:
            send_not_found(req, resp)
            return
        job = public_job(req.context.db.session, job_id)
        lang = page_language(req, job)
        back = f"/jobs/{job.id}?lang={lang.code}" if job is not None else None
        page = html_render.reported_page(lang, links(req), days=self.days, back=back)
        send_html(resp, page, lang)


class FraudPolicy:
    """GET /policies/job-fraud: how to report, what the operator does, and how soon."""

    def __init__(self, settings: Settings) -> None:
        self.days = settings.report_review_days

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        lang = page_language(req)
        send_html(resp, html_render.fraud_policy_page(lang, links(req), days=self.days), lang)


class PrivacyPolicy:
    """GET /policies/privacy: who is in charge of personal information (PRIVACY_CONTACT, as
    given, else the operator and MAIL_FROM), what is collected, why, and for how long."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        lang = page_language(req)
        s = self.settings
        page = html_render.privacy_policy_page(
            lang,
            links(req),
            contact=s.privacy_contact,
            mail_from=s.mail_from,
            retention=s.application_retention_days,
        )
        send_html(resp, page, lang)
