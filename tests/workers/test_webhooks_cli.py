"""`jobpost webhooks list` and the key of webhook secrets in the commands (C12, C14):
`jobpost dev` makes the key file; a process that would need the key, with endpoints and no
key, stops with one line naming JOBPOST_SECRET_KEY."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.fernet import Fernet
from sqlalchemy.orm import Session, sessionmaker

from models import employers
from models.core.settings import Settings
from models.db.entities import WebhookEndpoint
from models.webhooks import messages as webhook_messages
from models.webhooks import secrets
from workers.cli import main

pytestmark = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
AT = datetime(2026, 3, 10, 12, tzinfo=UTC)


def endpoint(sessions: sessionmaker[Session], name: str, url: str, events: list[str]) -> int:
    with sessions() as s:
        employer = employers.create_employer(s, name, "standard")
        row = WebhookEndpoint(
            employer_id=employer.id,
            url=url,
            events=webhook_messages.events_json(events),
            status="enabled",
            secret=secrets.encrypt("whsec_x", Fernet.generate_key()),
            created_at=AT,
            updated_at=AT,
        )
        s.add(row)
        s.commit()
        return employer.id


def test_webhooks_list_prints_the_api_shapes_without_secrets(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    first = endpoint(copy, "Maple", "https://a.example.com/in", ["job.expired"])
    second = endpoint(copy, "Birch", "https://b.example.com/in", ["*"])
    assert main(["webhooks", "list", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)["data"]
    assert [(w["employerId"], w["url"], w["events"]) for w in data] == [
        (first, "https://a.example.com/in", ["job.expired"]),
        (second, "https://b.example.com/in", ["*"]),
    ]
    assert set(data[0]) == {
        "id", "url", "events", "description", "status", "createdAt", "employerId"
    }  # fmt: skip
    assert data[0]["createdAt"] == "2026-03-10T12:00:00.000Z"
    assert main(["webhooks", "list", "--employer", str(second), "--json"]) == 0
    assert [w["employerId"] for w in orjson.loads(capsys.readouterr().out)["data"]] == [second]
    assert main(["webhooks", "list"]) == 0
    text = capsys.readouterr().out
    assert "https://a.example.com/in" in text and "whsec_" not in text


def test_a_service_with_endpoints_and_no_key_stops_with_one_line(
    copy: sessionmaker[Session], capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    started: list[str] = []
    monkeypatch.setattr("api.server.serve", lambda *a, **k: started.append("serve"))
    assert main(["serve"]) == 0  # no endpoint yet: nothing needs the key
    endpoint(copy, "Maple", "https://a.example.com/in", ["*"])
    assert main(["serve"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "JOBPOST_SECRET_KEY" in err[0]
    assert started == ["serve"]
    monkeypatch.setenv("JOBPOST_SECRET_KEY", Fernet.generate_key().decode())
    assert main(["serve"]) == 0
    assert started == ["serve", "serve"]


def test_dev_makes_the_key_file_once_and_keeps_it(
    copy: sessionmaker[Session], tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr("workers.dev.run", lambda *a: 0)
    assert main(["dev"]) == 0
    key_file = tmp_path / "secret.key"
    made = key_file.read_text()
    assert secrets.valid_key(made.strip())
    assert key_file.stat().st_mode & 0o077 == 0  # the owner's alone
    assert main(["dev"]) == 0
    assert key_file.read_text() == made  # the secrets it encrypted stay readable
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    assert secrets.load_key(settings) == made.strip().encode()
