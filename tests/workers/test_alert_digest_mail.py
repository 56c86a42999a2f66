"""C19: a digest as its bytes say it, in-process (the real worker and relay are
test_worker_alert_digest's): a search of no filter, a confidential employer, the pay and
place of each job, RFC 8058's headers, and a search's words adding no header."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from email import message_from_bytes, policy
from email.message import EmailMessage
from types import SimpleNamespace

from models.alerts.digests import Contents
from models.jobs.feeds import OpenJob, Place
from workers.mail import alerts as alert_mail

BASE = "https://jobs.example.ca"
MAIL_FROM = "jobpost@jobs.example"


def job(job_id: int, title: str, *, confidential: bool = False) -> OpenJob:
    return OpenJob(
        id=job_id,
        employer_name="Maple Corp",
        title=title,
        description="<p>x</p>",
        language="en",
        translation_title="Cuisinier" if job_id == 2 else None,
        translation_description="<p>x</p>" if job_id == 2 else None,
        publish_date=date(2026, 12, 1),
        close_date=date(2027, 1, 30),
        updated_at=datetime(2026, 12, 1, tzinfo=UTC),
        confidential=confidential,
        position_type_id=1,
        salary_amount=Decimal("25.50"),
        salary_max=None,
        salary_period_id=5,
        salary_commission=False,
        workplace_type="onSite",
        places=(Place("Toronto", "City", "ON", 1, "Toronto, ON"),),
        category_ids=(12,),
    )


def rendered(filters: str, language: str, jobs: list[OpenJob], total: int) -> EmailMessage:
    row = SimpleNamespace(id=7, email="ada@example.com", language=language, filters=filters)
    found = Contents(jobs, total)
    out = alert_mail.digest(row, found, "tok-en", mail_from=MAIL_FROM, base_url=BASE)
    message = message_from_bytes(out.data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def test_a_digest_of_every_job_lists_each_with_its_employer_place_pay_and_link() -> None:
    message = rendered("", "en", [job(1, "Line Cook", confidential=True), job(2, "Baker")], 2)
    assert message["Subject"] == "2 new jobs"  # not "for All jobs"
    assert message["List-Unsubscribe"] == f"<{BASE}/alerts/unsubscribe/tok-en>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    body = message.get_body(("plain",))
    assert body is not None
    words = body.get_content().replace("\r\n", "\n")
    assert "- Line Cook\n  Confidential employer · Toronto, ON · $25.50 an hour\n" in words
    assert f"  {BASE}/jobs/1?lang=en\n" in words
    assert "Maple Corp · Toronto, ON" in words  # the second job's employer is shown
    assert "more job" not in words  # all listed
    assert f"{BASE}/alerts/manage/tok-en?lang=en" in words


def test_a_french_digest_of_one_job_reads_its_translation() -> None:
    message = rendered("category=12&province=QC", "fr", [job(2, "Baker")], 1)
    assert message["Subject"].startswith("1 nouvel emploi pour ")
    body = message.get_body(("plain",))
    assert body is not None
    words = body.get_content().replace("\r\n", "\n")
    assert "- Cuisinier\n" in words and "1 nouvel emploi pour votre alerte\u00a0:" in words
    assert "de l’heure" in words


def test_a_searchs_words_add_no_header() -> None:
    """The sign-up refuses control characters in `q` (C15); a stored one is read back as no
    `q` at all (`Filters.from_query`), so it writes no header."""
    message = rendered("q=cook%0D%0ABcc%3A+x%40evil.example", "en", [job(1, "Cook")], 1)
    assert message["Bcc"] is None
    assert message["Subject"] == "1 new job"
    assert "evil.example" not in message.as_string()
