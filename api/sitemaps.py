"""What search engines read to find the job pages (C15): robots.txt, and a sitemap index
(sitemaps.org) of chunk sitemaps holding the open jobs by id range.

A chunk is a fixed range of ids, `CHUNK` of them: a job's page stays in the same chunk for
its whole life, and jobs coming and going never move others between chunks (as an OFFSET
would). A chunk holds at most `CHUNK` addresses, the protocol's 50,000 by default, and is
streamed as it is read (`models.jobs.feeds.page_stamps`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import falcon
from sqlalchemy import Connection
from sqlalchemy.orm import Session, sessionmaker

from api import conditional
from api.pages import page_url
from api.responses import INT32_MAX
from api.streams import streamed
from api.xml_text import attribute, element
from models.core.dates import timestamp
from models.core.errors import NotFound
from models.core.i18n import LANGUAGES
from models.jobs import feeds

CHUNK = 50_000  # addresses a chunk holds at most (sitemaps.org); the tests lower it
XML = "application/xml"
CACHE_CONTROL = "public, max-age=3600"
SITEMAPS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XHTML = 'xmlns:xhtml="http://www.w3.org/1999/xhtml"'
# The API, the operational endpoints and the forms and thank-you pages are not for search.
DISALLOWED = (
    "/api/",
    "/healthz",
    "/readyz",
    "/metrics",
    "/jobs/*/apply",
    "/jobs/*/applied",
    "/jobs/*/report",
    "/jobs/*/reported",
)
ALLOWED = ("/jobs/", "/policies/", "/feeds/", "/sitemaps/", "/sitemap.xml")


class Robots:
    """GET /robots.txt (RFC 9309): the public pages allowed, the rest not, and the sitemap."""

    def __init__(self, public_base_url: str) -> None:
        lines = ["User-agent: *"]
        lines += [f"Allow: {path}" for path in ALLOWED]
        lines += [f"Disallow: {path}" for path in DISALLOWED]
        lines += ["", f"Sitemap: {public_base_url}/sitemap.xml", ""]
        self.body = "\n".join(lines).encode()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if conditional.answered(
            req, resp, conditional.Validators(conditional.tag(self.body), None), CACHE_CONTROL
        ):
            return
        resp.data, resp.content_type = self.body, "text/plain; charset=utf-8"


class SitemapIndex:
    """GET /sitemap.xml: the chunks that hold an open job, each with its latest change. One
    line a chunk, so it is made whole: 43,000 chunks at most (Int32 ids)."""

    def __init__(self, public_base_url: str) -> None:
        self.base = public_base_url

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = feeds.chunks(req.context.db.connection, CHUNK)
        lines = ['<?xml version="1.0" encoding="UTF-8"?>', f"<sitemapindex {SITEMAPS}>"]
        for chunk in found:
            loc = element("loc", f"{self.base}/sitemaps/jobs-{chunk.number}.xml")
            lines.append(f"<sitemap>{loc}{element('lastmod', timestamp(chunk.latest))}</sitemap>")
        lines += ["</sitemapindex>", ""]
        body = "\n".join(lines).encode()
        validators = conditional.Validators(
            conditional.tag(body), max((c.latest for c in found), default=None)
        )
        if conditional.answered(req, resp, _whole_seconds(validators), CACHE_CONTROL):
            return
        resp.data, resp.content_type = body, XML


def _whole_seconds(validators: conditional.Validators) -> conditional.Validators:
    when = validators.last_modified
    return conditional.Validators(
        validators.etag, None if when is None else when.replace(microsecond=0)
    )


class SitemapChunk:
    """GET /sitemaps/jobs-{n}.xml: the open jobs with ids in ((n - 1) × CHUNK, n × CHUNK],
    each page with its French and English versions (`xhtml:link`); 404 when none is open."""

    def __init__(self, sessions: sessionmaker[Session], public_base_url: str) -> None:
        self.sessions, self.base = sessions, public_base_url

    def on_get(self, req: falcon.Request, resp: falcon.Response, number: int) -> None:
        size = CHUNK
        low = (number - 1) * size
        if low >= INT32_MAX:
            raise NotFound(f"No sitemap has number {number}.")
        high = low + size
        stamp = feeds.range_stamp(req.context.db.connection, low, high)
        if stamp.count == 0:
            raise NotFound(f"Sitemap {number} holds no open job.")
        validators = conditional.of_stamp(stamp, "sitemap", number, size, self.base)
        if conditional.answered(req, resp, validators, CACHE_CONTROL):
            return
        resp.content_type = XML
        resp.stream = streamed(self.sessions, lambda c: self._write(c, low, high))

    def _write(self, connection: Connection, low: int, high: int) -> Iterator[bytes]:
        yield f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {SITEMAPS} {XHTML}>\n'.encode()
        for batch in feeds.page_stamps(connection, low, high):
            yield "".join(self._url(job_id, at) for job_id, at in batch).encode()
        yield b"</urlset>\n"

    def _url(self, job_id: int, at: datetime) -> str:
        versions = "".join(
            f'<xhtml:link rel="alternate" hreflang="{code}" '
            f'href="{attribute(page_url(self.base, job_id, code))}"/>'
            for code in LANGUAGES
        )
        loc = element("loc", page_url(self.base, job_id, "en"))
        return f"<url>{loc}{element('lastmod', timestamp(at))}{versions}</url>\n"


class IndexNowKey:
    """GET /<INDEXNOW_KEY>.txt (C18): the key itself, as the IndexNow protocol has a site
    prove that the batches naming its pages are its own. Served only once configured."""

    def __init__(self, key: str) -> None:
        self.body = key.encode()

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if conditional.answered(
            req, resp, conditional.Validators(conditional.tag(self.body), None), CACHE_CONTROL
        ):
            return
        resp.data, resp.content_type = self.body, "text/plain; charset=utf-8"
