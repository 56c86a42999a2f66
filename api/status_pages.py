"""The application's private status page (C20), in English or French: the link of the
applicant's receipt, and its self-serve erasure (C13 Privacy) with a confirmation step.

The token is in the path. Every page is `no-store`, `noindex` and sends no Referer, since
its address is the key to an application. A GET changes nothing: the status page's button
POSTs to the erasure's address, which answers the confirmation page; only its own button
(the same address with `confirm=1`) erases, then 303 back to the status page, which then
says the application was erased.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from urllib.parse import quote

import falcon

from api import html_render, languages
from api.pages import links, page_language, send_html
from models.applications import privacy, receipts
from models.core.i18n import Language, language
from models.jobs.public import public_state

PATH = "/applications/status"


def status_path(token: str) -> str:
    return f"{PATH}/{quote(token, safe='')}"


def _private(resp: falcon.Response) -> None:
    resp.set_header("Cache-Control", "no-store")
    resp.set_header("X-Robots-Tag", "noindex")
    resp.set_header("Referrer-Policy", "no-referrer")  # the address is the application's key


def _unknown(req: falcon.Request, resp: falcon.Response) -> None:
    lang = page_language(req)
    _ = lang.gettext
    page = html_render.error_page(
        _("This link does not work"),
        _(
            "It is not a link we sent, or the application was deleted at the end of its "
            "retention period."
        ),
        lang,
        links(req),
    )
    send_html(resp, page, lang, 404)
    _private(resp)


class StatusPage:
    """GET /applications/status/{token}: received, delivered (or accepted by the employer's
    system), undeliverable with what to do, or erased; and the button to erase it."""

    def __init__(self, timezone: tzinfo) -> None:
        self.timezone = timezone

    def on_get(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        session = req.context.db.session
        found = receipts.status(session, token)
        if found is None:
            _unknown(req, resp)
            return
        lang = language(languages.choose(req, found.language))
        job_link = None
        if found.job_id is not None and public_state(session.connection(), found.job_id):
            job_link = f"/jobs/{found.job_id}?lang={lang.code}"
        page = html_render.render(
            "application_status.html",
            lang,
            links(req),
            status=found,
            received=self._moment(found.received_at, lang),
            delivered=self._moment(found.delivered_at, lang),
            job_link=job_link,
            erase=f"{status_path(token)}/erase?lang={lang.code}",
        )
        send_html(resp, page, lang)
        _private(resp)

    def _moment(self, when: datetime | None, lang: Language) -> str | None:
        return None if when is None else lang.moment(when.astimezone(self.timezone))


class ErasePage:
    """POST /applications/status/{token}/erase: the confirmation page; with `confirm=1`, the
    application erased (C13's erasure of one application), then 303 to its status page."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def on_post(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        session = req.context.db.session
        lang = page_language(req)
        back = f"{status_path(token)}?lang={lang.code}"
        if req.get_param("confirm") == "1":
            erased = privacy.erase_by_link(session, token, now=self.now())
            if not erased and not receipts.known(session, token):
                _unknown(req, resp)
                return
            resp.status = 303  # erased now, or before: the status page says so
            resp.location = back
            _private(resp)
            return
        found = receipts.status(session, token)
        if found is None:
            _unknown(req, resp)
            return
        if found.state == "erased":
            resp.status = 303
            resp.location = back
            _private(resp)
            return
        page = html_render.render(
            "application_erase.html",
            lang,
            html_render.Links(),
            confirm=f"{status_path(token)}/erase?lang={lang.code}&confirm=1",
            back=back,
        )
        send_html(resp, page, lang)
        _private(resp)
