"""The emails of job alerts (C19), in the subscriber's language: plain text, written by
workers.mail.mime with the copies' header guards (a search's words cannot add a header)."""

from __future__ import annotations

from email.utils import format_datetime
from typing import Any

from models.alerts import filters as alert_filters
from models.core import i18n
from models.core.dates import utcnow
from workers.mail import mime
from workers.mail.content import sender_domain
from workers.mail.mime import Outgoing


def message_id(mail_id: int, mail_from: str) -> str:
    """The same on every attempt, so a re-send in the crash window can be de-duplicated."""
    return f"<alert-{mail_id}@{sender_domain(mail_from)}>"


def confirmation(row: Any, token: str, *, mail_from: str, base_url: str) -> Outgoing:
    """The double opt-in's email: the search, and the link that confirms it (7 days)."""
    lang = i18n.language(row.language)
    _ = lang.gettext
    search = alert_filters.describe(alert_filters.from_query(row.filters), lang)
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
