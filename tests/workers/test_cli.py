"""The `jobpost` command line (C9), in-process: `main(argv)` on a committed copy of the suite's
migrated SQLite database (a file of the test's own, named by DATABASE_URL), the broker
replaced by a list of what was enqueued."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.db.entities import Application, OutboxEntry
from models.keys import SCOPES
from tests.conftest import nowhere_url
from workers.cli import main

pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


def failed_delivery(sessions: sessionmaker[Session]) -> int:
    """An application whose copy was refused for good (its job since deleted)."""
    with sessions() as s:
        employer = employers.create_employer(s, "Outbox Ltd", "standard")
        at = datetime(2026, 3, 10, 12, tzinfo=UTC)
        application = Application(
            job_id=None,
            employer_id=employer.id,
            name="Ada",
            email="ada@example.org",
            received_at=at,
            job_title="Baker",
            application_email="jobs@outbox.test",
            employer_name=employer.name,
        )
        application.outbox = OutboxEntry(
            status="failed", attempts=1, next_attempt_at=at, last_error="550 no such mailbox"
        )
        s.add(application)
        s.commit()
        return application.id


@pytest.mark.parametrize(
    "argv",
    [
        ["outbox", "--json", "retry", "--all-failed"],  # given to `outbox`, before `retry`
        ["outbox", "retry", "--all-failed", "--json"],  # given to `retry`
        ["outbox", "retry", "--json", "--all-failed"],
    ],
)
def test_outbox_retry_prints_json_wherever_json_is_given(
    copy: sessionmaker[Session], enqueued: list[int], capsys: Any, argv: list[str]
) -> None:
    """C9: `--json` makes a command print one JSON object on one line and nothing else."""
    failed = failed_delivery(copy)
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert len(printed.splitlines()) == 1
    assert orjson.loads(printed) == {"retried": [failed], "enqueued": 1}
    assert enqueued == [failed]


def test_outbox_retry_without_json_prints_text(
    copy: sessionmaker[Session], enqueued: list[int], capsys: Any
) -> None:
    failed_delivery(copy)
    assert main(["outbox", "retry", "--all-failed"]) == 0
    assert capsys.readouterr().out == "1 failed deliveries back to pending; 1 enqueued\n"


@pytest.mark.parametrize("argv", [["outbox", "--json"], ["outbox", "--json", "--status", "sent"]])
def test_outbox_listing_prints_json(
    copy: sessionmaker[Session], capsys: Any, argv: list[str]
) -> None:
    failed = failed_delivery(copy)
    assert main(argv) == 0
    entries = orjson.loads(capsys.readouterr().out)["entries"]
    assert [e["application"] for e in entries] == ([] if "sent" in argv else [failed])


def test_outbox_lists_undeliverable_copies_with_what_the_remote_server_said(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    """C22: a bounced copy is not at the employer: the default listing shows it too."""
    bounced = failed_delivery(copy)
    with copy() as s:
        entry = s.get_one(OutboxEntry, bounced)
        entry.status, entry.last_error = "undeliverable", "5.1.1 smtp; 550 5.1.1 User unknown"
        s.commit()
    for argv in (["outbox", "--json"], ["outbox", "--json", "--status", "undeliverable"]):
        assert main(argv) == 0
        [shown] = orjson.loads(capsys.readouterr().out)["entries"]
        assert (shown["application"], shown["status"]) == (bounced, "undeliverable")
        assert shown["lastError"] == "5.1.1 smtp; 550 5.1.1 User unknown"
    assert main(["outbox"]) == 0
    assert "undeliverable" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("nowhere", "the database (DATABASE_URL) failed: connection failed: "),
        ("empty", "the database has no jobpost tables (no such table: "),
    ],
)
@pytest.mark.parametrize("argv", [["employers", "list", "--json"], ["outbox"]])
def test_a_database_away_or_unmigrated_is_one_line_not_a_traceback(
    copy: sessionmaker[Session],
    unused_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    where: str,
    said: str,
    argv: list[str],
) -> None:
    """C9's exit 1, with what the database said and what to do."""
    empty = f"sqlite:///{tmp_path / 'new.db'}"
    monkeypatch.setenv("DATABASE_URL", nowhere_url(unused_port) if where == "nowhere" else empty)
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.startswith(f"jobpost: {said}") and printed.err.count("\n") == 1


def test_employers_set_changes_the_c13_settings_and_prints_them(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    with copy() as s:
        employer = employers.create_employer(s, "Érable Inc")
        s.commit()
    argv = ["employers", "set", str(employer.id), "--compliance", "enforce"]
    assert main([*argv, "--ontario-25-plus", "no", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown == {
        "id": employer.id,
        "name": "Érable Inc",
        "plan": "standard",
        "language": "en",
        "compliance": "enforce",
        "ontario25Plus": False,
        "emailKnockedOut": True,
        "notificationEmail": None,
        "flaggedAddresses": [],
    }
    assert main(["employers", "set", str(employer.id), "--email-knocked-out", "no", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["emailKnockedOut"] is False  # C21
    assert main(["employers", "set", str(employer.id), "--ontario-25-plus", "yes"]) == 0
    said = capsys.readouterr().out
    assert said == (
        f"Employer {employer.id}: language en, compliance enforce, 25+ employees in Ontario: yes.\n"
    )
    with copy() as s:
        stored = employers.get_employer(s, employer.id)
        assert (stored.compliance, stored.ontario25_plus) == ("enforce", True)
    assert main(["employers", "set", "999", "--compliance", "off"]) == 1
    assert "No employer has id 999" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["employers", "set", str(employer.id), "--compliance", "strict"])


def test_reports_list_show_and_resolve(copy: sessionmaker[Session], capsys: Any) -> None:
    from datetime import date, timedelta

    from models import reports
    from models.db.entities import Job

    with copy() as s:
        employer = employers.create_employer(s, "Report Ltd")
        job = Job(
            employer_id=employer.id,
            title="Baker",
            search_text="baker",
            publish_date=date(2026, 3, 10),
            close_date=date(2026, 3, 10) + timedelta(days=60),
            status="active",
            position_type_id=1,
            description="<p>Bake.</p>",
            routing_type=1,
            application_email="jobs@maple.test",
            updated_at=datetime(2026, 3, 10, tzinfo=UTC),
        )
        s.add(job)
        s.flush()
        first = reports.create(s, job.id, {"reason": "scam", "details": "A fee."}).id
        second = reports.create(s, job.id, {"reason": "other", "details": "Odd."}).id
        s.commit()
    assert main(["reports", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["data"]
    assert [(r["id"], r["status"], r["jobId"]) for r in listed] == [
        (first, "open", job.id),
        (second, "open", job.id),
    ]
    assert main(["reports", "show", str(first), "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == listed[0]
    assert main(["reports", "resolve", str(first), "--dismiss", "--note", "fine"]) == 0
    assert capsys.readouterr().out == f"Report {first}: dismissed.\n"
    assert main(["reports", "resolve", str(second), "--take-down", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["status"] == "taken_down"
    assert main(["reports", "--status", "open", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == {"data": []}
    with copy() as s:
        down = s.get(Job, job.id)
        assert down is not None and down.taken_down and down.status == "archived"
    assert main(["reports", "resolve", str(second), "--dismiss"]) == 1
    assert "already taken_down" in capsys.readouterr().err
    assert main(["reports", "show", "999"]) == 1
    with pytest.raises(SystemExit):
        main(["reports", "resolve", str(first)])  # --dismiss or --take-down: a usage error


def test_employers_create_and_set_choose_the_language_of_the_emails(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    """C13: `employers create --language` and `employers set ID --language`."""
    assert main(["employers", "create", "Érable inc.", "--language", "fr", "--json"]) == 0
    created = orjson.loads(capsys.readouterr().out)["employerId"]
    assert main(["employers", "create", "Maple Ltd", "--json"]) == 0
    default = orjson.loads(capsys.readouterr().out)["employerId"]
    assert main(["employers", "list", "--json"]) == 0
    listed = {e["id"]: e["language"] for e in orjson.loads(capsys.readouterr().out)["employers"]}
    assert listed[created] == "fr" and listed[default] == "en"
    assert main(["employers", "set", str(created), "--language", "en", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert (shown["id"], shown["language"]) == (created, "en")
    assert main(["employers", "set", str(default), "--json"]) == 0  # nothing given: unchanged
    assert orjson.loads(capsys.readouterr().out)["language"] == "en"
    with copy() as s:
        assert employers.get_employer(s, created).language == "en"
    with pytest.raises(SystemExit):
        main(["employers", "set", str(created), "--language", "de"])
    capsys.readouterr()


def test_keys_are_made_with_scopes_and_an_expiry_and_listed(
    copy: sessionmaker[Session], capsys: Any
) -> None:
    """C23: an operator's key with some scopes; without them, every scope."""
    with copy() as s:
        employer = employers.create_employer(s, "Keys Ltd", "standard")
        s.commit()
        employer_id = employer.id
    argv = ["keys", "create", str(employer_id), "--scopes", "jobs:read, syncs", "--json"]
    assert main([*argv, "--expires", "2028-01-01T00:00:00Z"]) == 0
    made = orjson.loads(capsys.readouterr().out)
    assert made["apiKey"].startswith("jp_") and made["id"] is not None
    assert main(["keys", "create", str(employer_id), "--json"]) == 0
    everything = orjson.loads(capsys.readouterr().out)["apiKey"]
    assert main(["keys", "list", str(employer_id), "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["data"]
    assert [k["scopes"] for k in listed] == [["jobs:read", "syncs"], list(SCOPES)]
    assert listed[0]["expiresAt"] == "2028-01-01T00:00:00.000Z"
    assert listed[1]["prefix"] == everything[:12]
    assert main(["keys", "create", str(employer_id), "--scopes", "admin"]) == 1
    said = capsys.readouterr().err
    assert "invalid field" in said and "scopes[0]: scopes[0] is one of jobs:read" in said
