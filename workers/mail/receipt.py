"""The applicant's receipt (C20), in the language of the page applied on: plain text, written
by workers.mail.mime with the copies' header guards (a job's title cannot add a header). It
names the job and, unless the job is confidential, its employer; never the employer's
address."""

from __future__ import annotations

from datetime import tzinfo
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

from models.core import i18n
from models.core.dates import utcnow
from workers.mail import mime
from workers.mail.content import sender_domain
from workers.mail.mime import Outgoing


def message_id(receipt_id: int, mail_from: str) -> str:
    """The same on every attempt, so a re-send in the crash window can be de-duplicated."""
    return f"<receipt-{receipt_id}@{sender_domain(mail_from)}>"


def status_url(base_url: str, token: str, code: str) -> str:
    return f"{base_url}/applications/status/{quote(token, safe='')}?lang={code}"


def render(
    row: Any,
    token: str,
    *,
    mail_from: str,
    base_url: str,
    retention_days: int,
    timezone: tzinfo,
) -> Outgoing:
    """The receipt of a claimed row (models.applications.receipts.claim): what was received
    and when, what happens next, the privacy notice, and the status page's link."""
    lang = i18n.language(row.language)
    _ = lang.gettext
    said = {"title": row.job_title, "employer": row.employer_name}
    if row.confidential:
        received = _("We received your application for %(title)s.") % said
    else:
        received = _("We received your application for %(title)s at %(employer)s.") % said
    when = lang.moment(row.received_at.astimezone(timezone))
    privacy = lang.ngettext(
        "Your name, your email address and what else you sent go to the employer. We keep "
        "them for %(count)s day, then delete them.",
        "Your name, your email address and what else you sent go to the employer. We keep "
        "them for %(count)s days, then delete them.",
        retention_days,
    ) % {"count": lang.number(retention_days)}
    body = "\n".join(
        [
            received,
            _("Received: %(when)s") % {"when": when},
            "",
            _("What happens next"),
            _(
                "We are sending your application to the employer now. The employer reads "
                "the applications and contacts the applicants it chooses; we do not hear "
                "its decision."
            ),
            "",
            _("See whether your application reached the employer, or erase it:"),
            status_url(base_url, token, lang.code),
            "",
            _("Privacy"),
            privacy,
            _("Privacy policy: %(url)s") % {"url": f"{base_url}/policies/privacy?lang={lang.code}"},
            "",
            _("Keep this email: its link is the only way to your application’s status."),
        ]
    )
    return mime.render_text(
        mail_from=mail_from,
        to=row.email,
        subject=_("Your application: %(title)s") % said,
        message_id=message_id(row.id, mail_from),
        date=format_datetime(utcnow()),
        body=body + "\n",
    )
