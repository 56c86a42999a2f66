"""What the search-engine notification tests share (C18): settings with a channel on, a
service account of a key made here, and every channel off again after each test."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from models.core.settings import Settings
from models.db.entities import SearchNotification
from models.notifications import channels

BASE = "https://jobs.example.ca"
KEY = "5f1c0a3e9b7d4c2a8e6f0b1d3c5a7e9f"


@pytest.fixture(autouse=True)
def channels_off() -> Iterator[None]:
    """An app built with a channel on installs it for the process: off again for the next."""
    yield
    channels.install(channels.OFF)


@pytest.fixture(scope="session")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def service_account(path: Path, key: rsa.RSAPrivateKey, token_uri: str) -> Path:
    """A service account key file as Google's console downloads it, for a key made here."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "jobpost-test",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "indexer@jobpost-test.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(info), encoding="utf-8")
    return path


def notifying(
    settings: Settings, tmp_path: Path, key: rsa.RSAPrivateKey, **more: object
) -> Settings:
    """`settings` with both channels on: IndexNow's key, a service account, the site's address."""
    account = service_account(tmp_path / "account.json", key, "http://127.0.0.1:9/token")
    return dataclasses.replace(
        settings,
        public_base_url=BASE,
        indexnow_key=KEY,
        google_service_account_file=account,
        **more,  # type: ignore[arg-type]
    )


def queued(sessions: sessionmaker[Session], channel: str = "indexnow") -> list[tuple[str, str]]:
    """What waits for `channel`: (kind, URL), oldest first."""
    n = SearchNotification
    with sessions() as s:
        rows = s.execute(
            select(n.kind, n.url).where(n.channel == channel, n.status == "pending").order_by(n.id)
        )
        return [(kind, url) for kind, url in rows]


def pages(job_id: int, kind: str = "URL_UPDATED") -> list[tuple[str, str]]:
    return [(kind, f"{BASE}/jobs/{job_id}?lang={code}") for code in ("en", "fr")]
