"""The key of webhook secrets and the secrets themselves (C12): Fernet at rest, the variable
before the key file, one line naming the variable when there is neither."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.fernet import Fernet, InvalidToken

from models.core.settings import Settings
from models.webhooks import secrets


def test_the_variable_wins_over_the_key_file(tmp_path: Path) -> None:
    (tmp_path / "secret.key").write_text(Fernet.generate_key().decode())
    key = Fernet.generate_key().decode()
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path), "JOBPOST_SECRET_KEY": key})
    assert secrets.load_key(settings) == key.encode()
    assert secrets.ensure_key_file(settings) is None


def test_no_key_at_all_names_the_variable(tmp_path: Path) -> None:
    settings = Settings.from_env({"JOBPOST_VAR_DIR": str(tmp_path)})
    with pytest.raises(secrets.MissingKey, match="JOBPOST_SECRET_KEY"):
        secrets.load_key(settings)
    (tmp_path / "secret.key").write_text("not a key\n")
    with pytest.raises(secrets.MissingKey, match="JOBPOST_SECRET_KEY"):
        secrets.load_key(settings)


def test_a_secret_is_whsec_and_32_random_bytes() -> None:
    made = {secrets.new_secret() for _ in range(50)}
    assert len(made) == 50
    for secret in made:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_encryption_round_trips_and_another_key_cannot_read_it() -> None:
    key = Fernet.generate_key()
    token = secrets.encrypt("whsec_abc", key)
    assert "whsec_abc" not in token and secrets.decrypt(token, key) == "whsec_abc"
    with pytest.raises(InvalidToken):
        secrets.decrypt(token, Fernet.generate_key())


def test_signing_secrets_hold_the_previous_one_until_its_time() -> None:
    key, now = Fernet.generate_key(), datetime(2026, 3, 10, tzinfo=UTC)
    endpoint = SimpleNamespace(
        secret=secrets.encrypt("new", key),
        previous_secret=secrets.encrypt("old", key),
        previous_secret_until=now + timedelta(hours=24),
    )
    assert secrets.signing_secrets(endpoint, now, key) == ["new", "old"]
    assert secrets.signing_secrets(endpoint, now + timedelta(hours=24), key) == ["new"]
    endpoint.previous_secret = None
    assert secrets.signing_secrets(endpoint, now, key) == ["new"]
