"""The notice of a flagged application address (C22), to the employer's notification address
in the employer's language: which address keeps bouncing, why, and the jobs that use it.
Plain text, written by workers.mail.mime with the copies' header guards."""

from __future__ import annotations

from email.utils import format_datetime
from typing import Any

from models.core import i18n
from models.core.dates import utcnow
from workers.mail import mime
from workers.mail.content import sender_domain
from workers.mail.mime import Outgoing


def message_id(notice_id: int, mail_from: str) -> str:
    return f"<address-notice-{notice_id}@{sender_domain(mail_from)}>"


def render(row: Any, jobs: list[tuple[int, str]], *, mail_from: str) -> Outgoing:
    """The notice of a claimed row (models.applications.bounces.claim_notice)."""
    lang = i18n.language(row.language)
    _ = lang.gettext
    said = {"address": row.address, "count": lang.number(row.hard_bounces or 0)}
    listed = [f"- {title} (id {job_id})" for job_id, title in jobs] or [_("(No job uses it now.)")]
    body = "\n".join(
        [
            _(
                "Copies of applications sent to %(address)s are not being delivered: its mail "
                "server refused %(count)s of them for good."
            )
            % said,
            _("Reason: %(reason)s") % {"reason": row.reason},
            "",
            _("Jobs that send applications to it:"),
            *listed,
            "",
            _(
                "Change the applicationEmail of these jobs (or route them by applicationUrl). "
                "Applications already received stay in the API: GET /api/v1.1/applications."
            ),
        ]
    )
    return mime.render_text(
        mail_from=mail_from,
        to=row.notification_email,
        subject=_("Applications to %(address)s are bouncing") % said,
        message_id=message_id(row.id, mail_from),
        date=format_datetime(utcnow()),
        body=body + "\n",
    )
