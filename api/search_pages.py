"""The public search page (C17): GET / and GET /jobs, in HTML, English or French.

The API's job list is GET /api/v1.1/jobs, so /jobs is free for people: no negotiation by
Accept or by key. `/` shows the same page, its canonical address being /jobs. The language
is chosen as on the job page (C13: `?lang=`, then Accept-Language, then English) and every
link and the form carry it. A query no search means is a 400 page that says what to fix,
with the form as typed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from urllib.parse import urlencode

import falcon
from markupsafe import Markup

from api import html_render, languages, query
from api.cache import Recent
from api.pages import page_url, send_html
from models.core.errors import FieldError
from models.core.i18n import N_, Language, language
from models.jobs import browse, feeds
from models.jobs.feeds import NAMES, Filters, OpenJob
from models.reference.lists import CATEGORIES, POSITION_TYPES, PROVINCES

PATH = "/jobs"
FEED = "/feeds/jobs.atom"  # the same search as an Atom feed (C15)
ALERTS = "/alerts/new"  # the same search by email (C19)
DAYS = (1, 3, 7, 14, 30)  # the form's choices of `days`; any 1 to 365 is taken
SORT_WORDS = {browse.NEWEST: N_("Newest first"), browse.CLOSING: N_("Closing soonest")}
# What a person reads of a value no search means, by parameter.
MESSAGES = {
    "q": N_("The search words hold characters that no search can use."),
    "category": N_("Choose a category from the list."),
    "province": N_("Choose a province or territory from the list."),
    "place": N_("This place is not one of the listed locations."),
    "positionType": N_("Choose a position type from the list."),
    "workplaceType": N_("Choose on site, hybrid or remote."),
    "minPay": N_("Enter the minimum pay as whole dollars a year, from 1 to 10,000,000."),
    "days": N_("Enter a number of days from 1 to 365."),
    "sort": N_("Choose newest first or closing soonest."),
    "page": N_("The page number must be a whole number from 1 to 500."),
}
FALLBACK = N_("A value of the search could not be read.")


@dataclass(frozen=True)
class Asked:
    """What the query asked: the filters, the sort and the page, and what was wrong."""

    filters: Filters
    sort: str
    page: int
    errors: list[FieldError]


def read_filters(req: falcon.Request, errors: list[FieldError]) -> Filters:
    """The filters of the query string, as the search page, the Atom feed (C15) and the alert
    sign-up (C19) all read them: an entry for each value no search means, a place no
    location has among them."""
    raw = {name: query.param(req, name, errors) for name in NAMES}
    filters, wrong = Filters.from_query(raw)
    errors.extend(wrong)
    errors.extend(feeds.unknown_places(req.context.db.connection, filters))
    return filters


def messages(errors: list[FieldError], lang: Language) -> list[str]:
    """What a person reads of a query's wrong values, once each, in `lang`."""
    said: list[str] = []
    for error in errors:
        message = lang.gettext(MESSAGES.get(error.field, FALLBACK))
        if message not in said:
            said.append(message)
    return said


def asked(req: falcon.Request) -> Asked:
    errors: list[FieldError] = []
    filters = read_filters(req, errors)
    sort = query.choice(req, "sort", browse.SORTS, errors) or browse.NEWEST
    page = _page(query.param(req, "page", errors), errors)
    return Asked(filters, sort, page, errors)


def _page(raw: str | None, errors: list[FieldError]) -> int:
    if raw is None:
        return 1
    if not query.DIGITS.fullmatch(raw) or not 1 <= int(raw) <= browse.MAX_PAGE:
        errors.append(FieldError("page", "out_of_range", f"page must be 1 to {browse.MAX_PAGE}."))
        return 1
    return int(raw)


def address(
    filters: Filters, sort: str, page: int, code: str, base: str = "", path: str = PATH
) -> str:
    """A results page's one address: the filters in a fixed order, then the sort when not
    the default, the page when not the first, and the language; the same search's feed
    and sign-up by `path`."""
    pairs = filters.to_query()
    if sort != browse.NEWEST:
        pairs.append(("sort", sort))
    if page > 1:
        pairs.append(("page", str(page)))
    pairs.append(("lang", code))
    return f"{base}{path}?{urlencode(pairs)}"


class SearchPage:
    """GET / and GET /jobs: the search form and a page of results (C17). A page of results
    is kept for SEARCH_PAGE_SECONDS by its language and query string as asked (the form shows
    the values as typed), as a shared cache may keep it for its `max-age`: a popular search
    is read and rendered once in that time."""

    def __init__(self, public_base_url: str, today: Callable[[], date], kept: Recent) -> None:
        self.base, self.today, self.kept = public_base_url, today, kept

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        lang = language(languages.choose(req))
        # Only pages of a valid query are kept, so a kept one needs no reading of the query.
        asked_as = f"{lang.code} {req.query_string}"
        kept = self.kept.get(asked_as)
        if kept is not None:
            self._send(resp, kept, lang)
            return
        wanted = asked(req)
        here = (wanted.filters, wanted.sort)
        canonical = address(*here, wanted.page, lang.code, self.base)
        if wanted.errors:
            self._invalid(req, resp, lang, wanted)
            return
        results = browse.search(
            req.context.db.connection,
            wanted.filters,
            self.today(),
            sort=wanted.sort,
            page=wanted.page,
            page_size=browse.PAGE_SIZE,
        )
        filtered = bool(wanted.filters.to_query())
        links = html_render.Links(
            {code: address(*here, wanted.page, code, self.base) for code in ("en", "fr")},
            canonical,
        )
        previous = address(*here, wanted.page - 1, lang.code) if wanted.page > 1 else None
        following = address(*here, wanted.page + 1, lang.code) if results.more else None
        page = html_render.search_page(
            lang,
            links,
            **_form(lang, req, wanted, True),
            title=_title(lang, wanted.page),
            errors=[],
            results=[_result(job, lang, wanted) for job in results.jobs],
            previous=previous,
            next=following,
            alert=address(wanted.filters, browse.NEWEST, 1, lang.code, path=ALERTS),
            feed=address(wanted.filters, browse.NEWEST, 1, lang.code, path=FEED),
            # Filtered pages past the first, and pages of no job, are not for an index.
            noindex=(filtered and wanted.page > 1) or not results.jobs,
        )
        body = page.encode()
        self.kept.put(asked_as, body)
        self._send(resp, body, lang)

    @staticmethod
    def _send(resp: falcon.Response, body: bytes, lang: Language) -> None:
        send_html(resp, body, lang)
        resp.set_header("Cache-Control", "public, max-age=60")

    def _invalid(
        self, req: falcon.Request, resp: falcon.Response, lang: Language, wanted: Asked
    ) -> None:
        alternates = {code: f"{PATH}?lang={code}" for code in ("en", "fr")}
        page = html_render.search_page(
            lang,
            html_render.Links(alternates),
            **_form(lang, req, wanted, False),
            title=lang.gettext("Please check the search"),
            errors=messages(wanted.errors, lang),
            results=[],
            previous=None,
            next=None,
            alert=None,
            feed=None,
            noindex=True,
        )
        send_html(resp, page, lang, 400)


def _title(lang: Language, page: int) -> str:
    title = lang.gettext("Find a job")
    if page > 1:
        title += " · " + lang.gettext("Page %(page)s") % {"page": page}
    return title


def _form(lang: Language, req: falcon.Request, wanted: Asked, known: bool) -> dict[str, object]:
    """The form's choices, in the page's language, and its values as the query gave them;
    the chosen place named when `known` (it exists)."""
    _ = lang.gettext
    values = {name: req.get_param(name) or "" for name in (*NAMES, "sort")}
    values["sort"] = values["sort"] or browse.NEWEST
    place = None
    if wanted.filters.place is not None and known:
        chosen = dataclasses.replace(wanted.filters, place=None)
        place = {
            "value": wanted.filters.place,
            "name": _place_name(req, wanted.filters.place),
            "without": address(chosen, wanted.sort, 1, lang.code),
        }
    return {
        "values": values,
        "place": place,
        "categories": sorted(((str(i), _(n)) for i, n in CATEGORIES), key=lambda c: c[1]),
        "provinces": sorted(((c, _(n)) for _i, c, n, _k in PROVINCES), key=lambda p: p[1]),
        "position_types": [(str(i), _(n)) for i, n in POSITION_TYPES],
        "workplace_types": [(k, _(w)) for k, w in html_render.WORKPLACE_WORDS.items()],
        "day_choices": [(str(d), _days(lang, d)) for d in DAYS],
        "sorts": [(k, _(w)) for k, w in SORT_WORDS.items()],
    }


def _days(lang: Language, days: int) -> str:
    words = lang.ngettext("In the last %(num)s day", "In the last %(num)s days", days)
    return words % {"num": lang.number(days)}


def _place_name(req: falcon.Request, place_id: int) -> str:
    return feeds.place_description(req.context.db.connection, place_id) or str(place_id)


@dataclass(frozen=True)
class Result:
    title: str
    lang: str | None  # the title's language when not the page's (C13)
    url: str
    employer: str | None
    places: list[tuple[str, str]]  # each place's name and its search
    workplace: str
    pay: str | None
    posted: Markup


def _result(job: OpenJob, lang: Language, wanted: Asked) -> Result:
    text = html_render.job_text(job, lang)
    places = []
    for p in job.places:
        narrowed = dataclasses.replace(wanted.filters, place=p.id)
        name = html_render.place_name(p.description or p.name, p.type, lang)
        places.append((name, address(narrowed, wanted.sort, 1, lang.code)))
    return Result(
        title=text.title,
        lang=text.lang,
        url=page_url("", job.id, lang.code),  # on this site, whichever address it answers at
        employer=None if job.confidential else job.employer_name,
        places=places,
        workplace=lang.gettext(html_render.WORKPLACE_WORDS[job.workplace_type]),
        pay=html_render.salary_words(job, lang),
        posted=html_render.published_on(job.publish_date, lang),
    )
