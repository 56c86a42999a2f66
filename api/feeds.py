"""Feeds of the open jobs for aggregators and feed readers (C15): JSON Feed 1.1, Indeed's XML
and Atom (RFC 4287), each streamed as its jobs are read in keyset batches
(`models.jobs.feeds.open_jobs`), with a strong ETag and Last-Modified from the jobs' stamp
(`api.conditional`), so a reader polling an unchanged feed costs one statement.

The JSON and Atom feeds speak English or French (`lang=`): a job's title and description in
that language where the job has them (C13), and its page's address in that language. Indeed's
feed is English. A confidential job names no employer (C2, C8).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, time
from email.utils import format_datetime
from urllib.parse import urlencode, urlsplit
from zoneinfo import ZoneInfo

import falcon
import orjson
from sqlalchemy import Connection
from sqlalchemy.orm import Session, sessionmaker

from api import conditional, html_render, query
from api.pages import page_url
from api.search_pages import read_filters
from api.streams import streamed
from api.xml_text import attribute, cdata, element, text
from models.core.dates import timestamp, today_in
from models.core.errors import FieldError
from models.core.i18n import LANGUAGES, N_, TAGS, Language, language
from models.jobs import feeds
from models.jobs.feeds import Filters, OpenJob
from models.reference.lists import CATEGORY_NAMES

CACHE_CONTROL = "public, max-age=300"  # open jobs change by the minute, not the second
TITLE = N_("Open jobs")
# Indeed's job types, by position type (C3); Volunteer has none of Indeed's own.
INDEED_JOBTYPE = {1: "fulltime", 2: "parttime", 3: "contract", 4: "temporary", 5: "volunteer"}
# Indeed's remote flag, by work arrangement (C16); an on-site job carries none.
INDEED_REMOTETYPE = {"remote": "Fully remote", "hybrid": "Hybrid remote"}

Render = Callable[[OpenJob], str]


class Feed(ABC):
    """What the three feeds share: the stamp, the validators, the streamed body; each
    format writes its head, its items and its tail."""

    path = ""
    content_type = ""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        public_base_url: str,
        timezone: ZoneInfo,
        now: Callable[[], datetime],
        lag_seconds: float,
        today: Callable[[], date] | None = None,
    ) -> None:
        self.sessions, self.base, self.timezone = sessions, public_base_url, timezone
        self.now, self.lag_seconds = now, lag_seconds  # CHANGE_FEED_LAG_SECONDS (C10, C14)
        self.today = today or (lambda: today_in(timezone))  # the service date, for `days` (C5)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        errors: list[FieldError] = []
        lang, filters = self.options(req, errors)
        if errors:
            raise query.invalid(errors)
        stamp = feeds.open_stamp(req.context.db.connection)
        # `days` counts back from today: the same jobs read another day are another body.
        today = self.today() if filters.days is not None else None
        shape = (self.path, lang.code, filters, today, self.base, str(self.timezone))
        settled = feeds.settled(stamp, self.now(), self.lag_seconds)
        validators = conditional.of_stamp(stamp, *shape, settled=settled)
        if conditional.answered(req, resp, validators, CACHE_CONTROL):
            return
        resp.content_type = self.content_type
        resp.set_header("Content-Language", lang.tag)
        feed_url = self.feed_url(lang, filters)
        latest = stamp.latest or datetime.fromtimestamp(0, UTC)

        def write(connection: Connection) -> Iterator[bytes]:
            yield self.head(lang, feed_url, latest).encode()
            written = False
            for batch in feeds.open_jobs(connection, filters, today):
                items = self.separator.join(self.item(job, lang) for job in batch)
                yield ((self.separator if written else "") + items).encode()
                written = True
            yield self.tail().encode()

        resp.stream = streamed(self.sessions, write)

    def options(self, req: falcon.Request, errors: list[FieldError]) -> tuple[Language, Filters]:
        code = query.choice(req, "lang", LANGUAGES, errors)
        return language(code or "en"), Filters()

    def feed_url(self, lang: Language, filters: Filters) -> str:
        carried = filters.to_query()
        if lang.code != "en":
            carried.append(("lang", lang.code))
        return f"{self.base}{self.path}" + (f"?{urlencode(carried)}" if carried else "")

    separator = ""  # between two items

    @abstractmethod
    def head(self, lang: Language, feed_url: str, latest: datetime) -> str:
        """Everything before the first item."""

    @abstractmethod
    def item(self, job: OpenJob, lang: Language) -> str:
        """One job."""

    @abstractmethod
    def tail(self) -> str:
        """Everything after the last item."""

    # --- what every format says of a job

    def published(self, job: OpenJob) -> datetime:
        """The publish date as the start of that day in the service's timezone (C5)."""
        return datetime.combine(job.publish_date, time(0), tzinfo=self.timezone)

    @staticmethod
    def employer(job: OpenJob, lang: Language) -> str:
        return lang.gettext(html_render.CONFIDENTIAL) if job.confidential else job.employer_name

    @staticmethod
    def categories(job: OpenJob, lang: Language) -> list[str]:
        return [lang.gettext(CATEGORY_NAMES[c]) for c in job.category_ids]


class JsonFeed(Feed):
    """GET /feeds/jobs.json: JSON Feed 1.1 (jsonfeed.org/version/1.1)."""

    path, content_type, separator = "/feeds/jobs.json", "application/feed+json", ","

    def head(self, lang: Language, feed_url: str, latest: datetime) -> str:
        top = {
            "version": "https://jsonfeed.org/version/1.1",
            "title": lang.gettext(TITLE),
            "feed_url": feed_url,
            "language": lang.tag,
        }
        return orjson.dumps(top).decode()[:-1] + ',"items":['

    def item(self, job: OpenJob, lang: Language) -> str:
        words = html_render.job_text(job, lang)
        entry: dict[str, object] = {
            "id": str(job.id),
            "url": page_url(self.base, job.id, lang.code),
            "title": words.title,
            "content_html": words.stored,
            "date_published": self.published(job).isoformat(),
            "date_modified": timestamp(job.updated_at),
            "authors": [{"name": self.employer(job, lang)}],
            "tags": self.categories(job, lang),
        }
        if words.lang is not None:
            entry["language"] = TAGS[words.lang]
        return orjson.dumps(entry).decode()

    def tail(self) -> str:
        return "]}"


class AtomFeed(Feed):
    """GET /feeds/jobs.atom: Atom (RFC 4287), narrowed by every filter of the public search
    (C17), read as the search page reads them: its address with /jobs gives the same jobs."""

    path, content_type = "/feeds/jobs.atom", "application/atom+xml"

    def options(self, req: falcon.Request, errors: list[FieldError]) -> tuple[Language, Filters]:
        lang, _ = super().options(req, errors)
        return lang, read_filters(req, errors)

    def head(self, lang: Language, feed_url: str, latest: datetime) -> str:
        return (
            '<?xml version="1.0" encoding="utf-8"?>\n'
            f'<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="{lang.tag}">\n'
            + element("id", feed_url)
            + element("title", lang.gettext(TITLE))
            + element("updated", timestamp(latest))
            + f'<link rel="self" type="application/atom+xml" href="{attribute(feed_url)}"/>'
            + element("generator", "jobpost")
            + "\n"
        )

    def item(self, job: OpenJob, lang: Language) -> str:
        words = html_render.job_text(job, lang)
        url = page_url(self.base, job.id, lang.code)
        named = (CATEGORY_NAMES[c] for c in job.category_ids)
        categories = "".join(
            f'<category term="{c}" label="{attribute(lang.gettext(name))}"/>'
            for c, name in zip(job.category_ids, named, strict=True)
        )
        text_lang = f' xml:lang="{TAGS[words.lang]}"' if words.lang is not None else ""
        return (
            "<entry>"
            + element("id", f"{self.base}/jobs/{job.id}")
            + f"<title{text_lang}>{text(words.title)}</title>"
            + f'<link rel="alternate" type="text/html" href="{attribute(url)}"/>'
            + element("published", self.published(job).isoformat())
            + element("updated", timestamp(job.updated_at))
            + f"<author>{element('name', self.employer(job, lang))}</author>"
            + categories
            + f'<content type="html"{text_lang}>{text(words.stored)}</content>'
            + "</entry>\n"
        )

    def tail(self) -> str:
        return "</feed>\n"


class IndeedFeed(Feed):
    """GET /feeds/indeed.xml: Indeed's XML job feed, in English. One location a job: the
    first (Indeed takes one city and state a job)."""

    path, content_type = "/feeds/indeed.xml", "application/xml"

    def options(self, req: falcon.Request, errors: list[FieldError]) -> tuple[Language, Filters]:
        return language("en"), Filters()

    def head(self, lang: Language, feed_url: str, latest: datetime) -> str:
        return (
            '<?xml version="1.0" encoding="utf-8"?>\n<source>\n'
            + element("publisher", urlsplit(self.base).hostname or self.base)
            + element("publisherurl", f"{self.base}/")
            + element("lastBuildDate", format_datetime(latest, usegmt=True))
            + "\n"
        )

    def item(self, job: OpenJob, lang: Language) -> str:
        words = html_render.job_text(job, lang)
        fields: list[tuple[str, str | None]] = [
            ("title", words.title),
            ("date", format_datetime(self.published(job))),
            ("referencenumber", str(job.id)),
            ("url", page_url(self.base, job.id, "en")),
            ("company", None if job.confidential else job.employer_name),
            *_place(job),
            ("description", words.stored),
            ("salary", html_render.salary_words(job, lang)),
            ("jobtype", INDEED_JOBTYPE.get(job.position_type_id)),
            ("category", ", ".join(self.categories(job, lang)) or None),
            ("remotetype", INDEED_REMOTETYPE.get(job.workplace_type)),
        ]
        inner = "".join(f"<{k}>{cdata(v)}</{k}>" for k, v in fields if v is not None)
        return f"<job>{inner}</job>\n"

    def tail(self) -> str:
        return "</source>\n"


def _place(job: OpenJob) -> Iterable[tuple[str, str | None]]:
    first = job.places[0] if job.places else None
    city = first.name if first is not None and first.type == "City" else None
    return [
        ("city", city),
        ("state", first.province_code if first is not None else None),
        ("country", "CA"),
        # The gazetteer holds no postal codes (C3): `postalcode` waits for one.
    ]
