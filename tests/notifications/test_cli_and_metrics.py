"""C18: what waits, per channel, in `/metrics` and in `jobpost notifications`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api.app import WsgiApp, create_app
from models.core.settings import Settings
from models.db.engines import make_engine
from models.db.unit_of_work import make_sessionmaker, session_scope
from models.notifications import channels
from models.notifications import queue as notifications
from tests.api.test_observability import samples
from tests.conftest import Api, Clock, copy_database
from tests.factories import create_job
from tests.notifications.conftest import BASE, KEY, notifying
from workers.cli import main


@pytest.fixture
def app(
    settings: Settings,
    sessions: sessionmaker[Session],
    clock: Clock,
    tmp_path: Path,
    private_key: rsa.RSAPrivateKey,
) -> WsgiApp:
    return create_app(notifying(settings, tmp_path, private_key), sessions, today=clock)


def test_metrics_count_the_notifications_by_channel_and_status(api: Api, employer: Any) -> None:
    create_job(api, employer, status="active")
    result = api.get("/metrics")
    assert result.status_code == 200
    found = samples(result.text, "jobpost_search_notifications")
    for channel in ("indexnow", "google"):
        assert found[(("channel", channel), ("status", "pending"))] == 2
        assert found[(("channel", channel), ("status", "sent"))] == 0
        assert found[(("channel", channel), ("status", "failed"))] == 0


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_the_cli_shows_what_is_pending_per_channel(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    url = copy_database(engine, tmp_path / "jobpost.db")
    for name, value in {
        "DATABASE_URL": url,
        "JOBPOST_VAR_DIR": str(tmp_path),
        "PUBLIC_BASE_URL": BASE,
        "INDEXNOW_KEY": KEY,
    }.items():
        monkeypatch.setenv(name, value)
    copy = make_engine(url)
    channels.install(channels.Channels(BASE, (channels.INDEXNOW,)))
    with session_scope(make_sessionmaker(copy)) as s:
        notifications.jobs_changed(s, updated=[7], deleted=[8])
    copy.dispose()
    capsys.readouterr()
    assert main(["notifications", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["indexnow"]["configured"] is True and shown["google"]["configured"] is False
    assert shown["indexnow"]["counts"]["pending"] == 4
    assert [(p["kind"], p["url"]) for p in shown["indexnow"]["pending"]] == [
        ("URL_UPDATED", f"{BASE}/jobs/7?lang=en"),
        ("URL_UPDATED", f"{BASE}/jobs/7?lang=fr"),
        ("URL_DELETED", f"{BASE}/jobs/8?lang=en"),
        ("URL_DELETED", f"{BASE}/jobs/8?lang=fr"),
    ]
    assert shown["google"]["quota"] == {"perDay": 200, "usedToday": 0}
    assert main(["notifications", "--limit", "1"]) == 0
    text = capsys.readouterr().out
    assert "indexnow: on; 4 pending, 0 sending, 0 sent, 0 failed" in text
    assert "google: off (not configured)" in text
    assert f"URL_UPDATED {BASE}/jobs/7?lang=en  attempts 0" in text
    assert "jobs/7?lang=fr" not in text  # --limit 1
