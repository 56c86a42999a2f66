"""The emails of job alerts (C19), in the subscriber's language: plain text, written by
workers.mail.mime with the copies' header guards (a search's words cannot add a header)."""

from __future__ import annotations

from email.utils import format_datetime
from typing import Any
from urllib.parse import quote, urlencode

from api import html_render
from models.alerts import digests
from models.alerts import filters as alert_filters
from models.core import i18n
from models.core.dates import utcnow
from models.core.i18n import Language
from models.jobs.feeds import Filters, OpenJob
from workers.mail import mime
from workers.mail.content import sender_domain
from workers.mail.mime import Outgoing

# RFC 8058: the one-click unsubscribe a mail client POSTs to the List-Unsubscribe address.
ONE_CLICK = "List-Unsubscribe=One-Click"


def message_id(mail_id: int, mail_from: str) -> str:
    """The same on every attempt, so a re-send in the crash window can be de-duplicated."""
    return f"<alert-{mail_id}@{sender_domain(mail_from)}>"


def confirmation(
    row: Any, token: str, *, mail_from: str, base_url: str, place: str | None = None
) -> Outgoing:
    """The double opt-in's email: the search (`place` the name of its place, if it has one),
    and the link that confirms it (7 days)."""
    lang = i18n.language(row.language)
    _ = lang.gettext
    search = alert_filters.describe(alert_filters.from_query(row.filters), lang, place)
    link = f"{base_url}/alerts/confirm/{token}?lang={lang.code}"
    body = "\n".join(
        [
            _("Someone, we hope you, asked for emails of the new jobs of this search:"),
            "",
            f"  {search}",
            "",
            _("To get them, confirm within 7 days:"),
            "",
            link,
            "",
            _("If you did not ask for them, ignore this email: we will send you nothing else."),
        ]
    )
    return mime.render_text(
        mail_from=mail_from,
        to=row.email,
        subject=_("Confirm your job alert"),
        message_id=message_id(row.id, mail_from),
        date=format_datetime(utcnow()),
        body=body + "\n",
    )


def digest(
    row: Any,
    found: digests.Contents,
    token: str,
    *,
    mail_from: str,
    base_url: str,
    place: str | None = None,
) -> Outgoing:
    """The jobs new to an alert: up to LISTED of them, then a link to the search for the
    rest; the manage link; and RFC 8058's one-click unsubscribe headers. `place` names the
    search's place, if it has one."""
    lang = i18n.language(row.language)
    filters = alert_filters.from_query(row.filters)
    search = alert_filters.describe(filters, lang, place)
    link = quote(token, safe="")
    unsubscribe = f"<{base_url}/alerts/unsubscribe/{link}>"
    return mime.render_text(
        mail_from=mail_from,
        to=row.email,
        subject=_subject(filters, search, found.total, lang),
        message_id=message_id(row.id, mail_from),
        date=format_datetime(utcnow()),
        body=_digest_body(filters, search, found, link, lang, base_url),
        headers=[("List-Unsubscribe", unsubscribe), ("List-Unsubscribe-Post", ONE_CLICK)],
    )


def _subject(filters: Filters, search: str, total: int, lang: Language) -> str:
    said = {"n": lang.number(total), "search": search}
    if not filters.to_query():  # not "3 new jobs for All jobs"
        return lang.ngettext("%(n)s new job", "%(n)s new jobs", total) % said
    return (
        lang.ngettext("%(n)s new job for %(search)s", "%(n)s new jobs for %(search)s", total) % said
    )


def _digest_body(
    filters: Filters,
    search: str,
    found: digests.Contents,
    link: str,
    lang: Language,
    base_url: str,
) -> str:
    n = found.total
    lines = [
        lang.ngettext("%(n)s new job for your alert:", "%(n)s new jobs for your alert:", n)
        % {"n": lang.number(n)},
        "",
        f"  {search}",
        "",
    ]
    for job in found.jobs:
        lines += [*_job_lines(job, lang, base_url), ""]
    more = n - len(found.jobs)
    if more > 0:
        pairs = urlencode([*filters.to_query(), ("lang", lang.code)])
        lines += [
            lang.ngettext("%(n)s more job:", "%(n)s more jobs:", more) % {"n": lang.number(more)},
            f"{base_url}/jobs?{pairs}",
            "",
        ]
    lines += [
        lang.gettext("Change how often you get this alert, or stop it:"),
        f"{base_url}/alerts/manage/{link}?lang={lang.code}",
    ]
    return "\n".join(lines) + "\n"


def _job_lines(job: OpenJob, lang: Language, base_url: str) -> list[str]:
    """A job as a digest lists it: title, employer (unless confidential), place, pay, link."""
    title = html_render.job_text(job, lang).title
    employer = lang.gettext(html_render.CONFIDENTIAL) if job.confidential else job.employer_name
    facts = [employer]
    if job.places:
        place = job.places[0]
        facts.append(html_render.place_name(place.description, place.type, lang))
    pay = html_render.salary_words(job, lang)
    if pay:
        facts.append(pay)
    return [f"- {title}", f"  {' · '.join(facts)}", f"  {base_url}/jobs/{job.id}?lang={lang.code}"]
