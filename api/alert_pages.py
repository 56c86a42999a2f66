"""The job alerts' pages (C19), in English or French: the sign-up form, its confirmation,
the manage page and the one-click unsubscribe of RFC 8058.

The search comes in the page's query string (`/alerts/new?q=cook&province=QC`) and is read
as the search page and the Atom feed read it (`api.search_pages.read_filters`, C15, C17), on
GET and on the form's POST alike (the form posts back to its own address), so an alert
searches exactly what the page and the feed show.
A link's token is in the path; its pages are never cached. The confirmation and unsubscribe
links show a page with a button and act on its POST: a mail scanner that follows a link
must neither confirm an address nor unsubscribe it. The unsubscribe POST needs nothing else
(RFC 8058's `List-Unsubscribe=One-Click` body, or the button's empty one).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from urllib.parse import quote

import falcon

from api import forms, html_render, search_pages
from api.body import read_bytes
from api.clients import client_address, rate_key
from api.pages import links, page_language, send_html
from api.ratelimit import Limiter
from models.alerts import filters as alert_filters
from models.alerts import mails
from models.alerts import subscriptions as alerts
from models.core.errors import FieldError, ValidationFailed
from models.core.i18n import N_, Language
from models.core.settings import Network
from models.db.unit_of_work import after_commit
from models.jobs.browse import NEWEST
from models.jobs.feeds import Filters

# A confirmation email to send (its `alert_mails` id), once committed (C19).
EnqueueAlertMail = Callable[[int], object]
SIGN_UP_LIMIT = 16 * 1024  # an address and a frequency, and the form's parts around them
# The apply limit's setting, counted apart, as reports are (C13): alerts use up nothing else.
BUCKET = "alert:"
FREQUENCY_WORDS = {"daily": N_("Daily"), "weekly": N_("Weekly")}
MESSAGES = {
    ("email", "required"): N_("Please enter your email address."),
    ("email", "invalid_format"): N_("Please enter a valid email address, like name@example.com."),
    ("email", "too_long"): N_("An email address has at most 254 characters."),
    ("email", "too_many"): N_("This address has as many alerts as it can have."),
    ("frequency", "out_of_range"): N_("Please choose daily or weekly."),
}
FALLBACK = N_("Please check this field.")


def no_mail(mail_id: int) -> None:
    """No broker wired: the sweeper sends the confirmation later."""


def _frequencies(lang: Language) -> list[tuple[str, str]]:
    return [(value, lang.gettext(words)) for value, words in FREQUENCY_WORDS.items()]


def new_alert_url(filters: Filters, code: str) -> str:
    return search_pages.address(filters, NEWEST, 1, code, path=search_pages.ALERTS)


def _token_path(kind: str, token: str) -> str:
    return f"/alerts/{kind}/{quote(token, safe='')}"


def _send(req: falcon.Request, resp: falcon.Response, page: str, status: int = 200) -> None:
    """A page of a link or of the form: never kept by a cache (C19)."""
    send_html(resp, page, page_language(req), status)
    resp.set_header("Cache-Control", "no-store")


def _message(
    req: falcon.Request, resp: falcon.Response, heading: str, message: str, status: int
) -> None:
    page = html_render.error_page(heading, message, page_language(req), links(req))
    _send(req, resp, page, status)


def _button(
    req: falcon.Request, resp: falcon.Response, heading: str, message: str, button: str
) -> None:
    """A link's page (confirm, unsubscribe): one button that POSTs to the link's own address,
    since a mail scanner follows links and a GET must change nothing."""
    lang = page_language(req)
    values = {"heading": heading, "message": message, "button": button}
    action = f"{quote(req.path)}?lang={lang.code}"
    page = html_render.render("alert_button.html", lang, links(req), action=action, **values)
    _send(req, resp, page)


def _unknown_link(req: falcon.Request, resp: falcon.Response) -> None:
    _ = page_language(req).gettext
    _message(
        req,
        resp,
        _("This link does not work"),
        _("It is not a link we sent, or it has expired. You can sign up for the alert again."),
        404,
    )


def _to_manage(req: falcon.Request, resp: falcon.Response, token: str, saved: str) -> None:
    """303 to the manage page, saying what was just done."""
    resp.status = 303
    code = page_language(req).code
    resp.location = f"{_token_path('manage', token)}?lang={code}&saved={saved}"


def _read_form(
    req: falcon.Request,
    resp: falcon.Response,
    check: Callable[[falcon.Request], None] | None = None,
) -> dict[str, str] | None:
    """A posted form's text fields (`check` runs once the body is read: the rate limit), or
    None once a page said why it was refused."""
    try:
        data = read_bytes(req, SIGN_UP_LIMIT)
        if check is not None:
            check(req)
        parsed = forms.parse_multipart(req.content_type or "", data)
    except falcon.HTTPError as e:
        _refused(req, resp, e)
        return None
    return {k: v for k, v in parsed.items() if isinstance(v, str)}


def _refused(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError) -> None:
    _ = page_language(req).gettext
    status = error.status_code
    if status == 429:
        wait = dict(error.headers or {}).get("Retry-After", "60")
        heading = _("Too many sign-ups")
        message = _(
            "Too many alerts were requested from your network. Try again in %(seconds)s seconds."
        ) % {"seconds": wait}
        _message(req, resp, heading, message, 429)
        resp.set_header("Retry-After", wait)
        return
    heading = _("The form could not be read")
    message = _("Please go back to the form and send it again.")
    _message(req, resp, heading, message, 413 if status == 413 else 400)


class SignUp:
    """GET /alerts/new?<the search page's filters>: the form; POST: a pending alert and its
    confirmation email, then 303 to /alerts/sent. A filled honeypot gets the same 303 with
    nothing stored; a client over its share of sign-ups gets a 429 page (C19)."""

    def __init__(
        self,
        limiter: Limiter,
        trusted_proxies: tuple[Network, ...],
        now: Callable[[], datetime],
        enqueue: EnqueueAlertMail = no_mail,
    ) -> None:
        self.limiter, self.trusted_proxies = limiter, trusted_proxies
        self.now, self.enqueue = now, enqueue

    def _filters(self, req: falcon.Request, resp: falcon.Response) -> Filters | None:
        errors: list[FieldError] = []
        filters = search_pages.read_filters(req, errors)
        if not errors:
            return filters
        lang = page_language(req)
        said = " ".join(search_pages.messages(errors, lang))
        message = lang.gettext("The search in this link could not be read: %(errors)s")
        heading = lang.gettext("This search could not be read")
        _message(req, resp, heading, message % {"errors": said}, 400)
        return None

    def _page(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        filters: Filters,
        form: html_render.FormState,
        status: int,
    ) -> None:
        lang = page_language(req)
        page_links = html_render.Links(
            {code: new_alert_url(filters, code) for code in ("en", "fr")}
        )
        page = html_render.render(
            "alert_new.html",
            lang,
            page_links,
            search=alert_filters.search_words(req.context.db.connection, filters, lang),
            form=form,
            frequencies=_frequencies(lang),
            action=new_alert_url(filters, lang.code),
            privacy=f"{html_render.PRIVACY_POLICY}?lang={lang.code}",
        )
        send_html(resp, page, lang, status)
        resp.set_header("Cache-Control", "no-store" if status != 200 else "no-cache")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        filters = self._filters(req, resp)
        if filters is not None:
            self._page(req, resp, filters, html_render.FormState(), 200)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        fields = _read_form(req, resp, self.check_rate)
        if fields is None:
            return
        filters = self._filters(req, resp)
        if filters is None:
            return
        lang = page_language(req)
        if not fields.get("website"):  # the honeypot: a bot is told it succeeded
            session = req.context.db.session
            try:
                email, frequency = alerts.read_sign_up(fields)
                made = alerts.sign_up(session, email, frequency, lang.code, filters, now=self.now())
            except ValidationFailed as e:
                form = html_render.FormState(
                    values={k: fields[k] for k in ("email", "frequency") if k in fields}
                )
                for error in e.errors:
                    message = lang.gettext(MESSAGES.get((error.field, error.code), FALLBACK))
                    form.errors.setdefault(error.field, []).append(message)
                self._page(req, resp, filters, form, 422)
                return
            if made.subscription.state == "pending":  # a confirmed alert needs no opt-in
                mail_id = mails.queue_confirmation(session, made.subscription, now=self.now())
                after_commit(session, lambda: self.enqueue(mail_id))
        resp.status = 303
        resp.location = f"/alerts/sent?lang={lang.code}"

    def check_rate(self, req: falcon.Request) -> None:
        """429 once the client has sent its share of sign-ups (APPLY_RATE_LIMIT, counted
        apart from applications and reports, as reports are: `api.reports`)."""
        wait = self.limiter.hit(BUCKET + rate_key(client_address(req, self.trusted_proxies)))
        if wait is not None:
            raise falcon.HTTPTooManyRequests(headers={"Retry-After": str(wait)})


class Sent:
    """GET /alerts/sent: check your inbox. The same page whether or not anything was stored
    (the honeypot), and whether or not the address had the alert already."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _ = page_language(req).gettext
        _message(
            req,
            resp,
            _("Check your email"),
            _(
                "We sent you a link to confirm your alert. It works for 7 days; until you "
                "follow it, we send you nothing else."
            ),
            200,
        )


class Confirm:
    """GET /alerts/confirm/{token}: a page with a button; POST: the alert confirmed, then 303
    to its manage page."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def on_get(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        _ = page_language(req).gettext
        _button(
            req,
            resp,
            _("Confirm your job alert"),
            _("Confirm that you would like to get emails of the new jobs of this search."),
            _("Confirm"),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        done = alerts.confirm(req.context.db.session, token, now=self.now())
        if done is None:
            _unknown_link(req, resp)
            return
        _to_manage(req, resp, done.manage_token, "confirmed")


class Manage:
    """GET /alerts/manage/{token}: the alert, its frequency to change and a button to
    unsubscribe; POST: the frequency changed, then 303 back."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def on_get(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        found = alerts.managed(req.context.db.session, token)
        if found is None:
            _unknown_link(req, resp)
            return
        lang = page_language(req)
        filters = alert_filters.from_query(found.filters)
        page = html_render.render(
            "alert_manage.html",
            lang,
            links(req),
            saved=req.get_param("saved") is not None,
            search=alert_filters.search_words(req.context.db.connection, filters, lang),
            email=found.email,
            state=found.state,
            frequency=found.frequency,
            frequencies=_frequencies(lang),
            action=f"{_token_path('manage', token)}?lang={lang.code}",
            unsubscribe=f"{_token_path('unsubscribe', token)}?lang={lang.code}",
            again=new_alert_url(filters, lang.code),
        )
        _send(req, resp, page)

    def on_post(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        fields = _read_form(req, resp)
        if fields is None:
            return
        session, frequency = req.context.db.session, fields.get("frequency", "")
        try:
            found = alerts.set_frequency(session, token, frequency, now=self.now())
        except ValidationFailed:
            _ = page_language(req).gettext
            message = _("Please choose daily or weekly.")
            _message(req, resp, _("The form could not be read"), message, 422)
            return
        if found is None:
            _unknown_link(req, resp)
            return
        _to_manage(req, resp, token, "1")


class Unsubscribe:
    """GET /alerts/unsubscribe/{token}: a page with a button; POST: unsubscribed at once,
    with no confirmation (RFC 8058 one-click: every alert email's List-Unsubscribe)."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def on_get(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        if alerts.managed(req.context.db.session, token) is None:
            _unknown_link(req, resp)
            return
        _ = page_language(req).gettext
        _button(
            req,
            resp,
            _("Unsubscribe from this job alert"),
            _("You will get no more emails from this alert."),
            _("Unsubscribe"),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        found = alerts.unsubscribe(req.context.db.session, token, now=self.now())
        if found is None:
            _unknown_link(req, resp)
            return
        _ = page_language(req).gettext
        _message(
            req,
            resp,
            _("You are unsubscribed"),
            _("This alert sends you no more emails."),
            200,
        )
