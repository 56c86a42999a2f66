"""C18's settings: each channel off until configured, and a configuration that cannot work
refused at start in one line naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from models.core.settings import Settings
from models.notifications import channels
from tests.notifications.conftest import BASE, KEY, service_account


def test_every_channel_is_off_by_default() -> None:
    settings = Settings.from_env({"PUBLIC_BASE_URL": BASE})
    assert settings.indexnow_key is None and settings.google_service_account_file is None
    assert settings.google_indexing_daily_quota == 200
    assert channels.of_settings(settings) == channels.OFF


def test_each_channel_is_on_once_configured(tmp_path: Path, private_key: rsa.RSAPrivateKey) -> None:
    account = service_account(tmp_path / "a.json", private_key, "https://oauth2.example/token")
    env = {"PUBLIC_BASE_URL": BASE + "/", "INDEXNOW_KEY": KEY}
    assert channels.of_settings(Settings.from_env(env)).on == ("indexnow",)
    env["GOOGLE_SERVICE_ACCOUNT_FILE"] = str(account)
    found = channels.of_settings(Settings.from_env(env))
    assert found == channels.Channels(BASE, ("indexnow", "google"))


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"INDEXNOW_KEY": KEY}, "INDEXNOW_KEY is set but PUBLIC_BASE_URL is not"),
        ({"PUBLIC_BASE_URL": BASE, "INDEXNOW_KEY": "short"}, "INDEXNOW_KEY='short': not 8 to 128"),
        ({"PUBLIC_BASE_URL": BASE, "INDEXNOW_KEY": "a b c d e f g h"}, "INDEXNOW_KEY="),
        ({"INDEXNOW_ENDPOINT": "ftp://x"}, "INDEXNOW_ENDPOINT='ftp://x': not an absolute"),
        ({"GOOGLE_INDEXING_ENDPOINT": "nowhere"}, "GOOGLE_INDEXING_ENDPOINT='nowhere'"),
        (
            {"GOOGLE_INDEXING_DAILY_QUOTA": "0"},
            "GOOGLE_INDEXING_DAILY_QUOTA='0': must be at least 1",
        ),
        (
            {"GOOGLE_SERVICE_ACCOUNT_FILE": "/no/such.json"},
            "GOOGLE_SERVICE_ACCOUNT_FILE='/no/such.json': cannot read it",
        ),
    ],
)
def test_a_configuration_that_cannot_work_is_refused_naming_it(
    env: dict[str, str], said: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        Settings.from_env(env)


def test_a_file_that_is_no_service_account_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"type": "authorized_user"}')
    (tmp_path / "y.json").write_text("not json")
    for name, said in (("x.json", "no client_email, private_key, token_uri"), ("y.json", "JSON")):
        env = {"PUBLIC_BASE_URL": BASE, "GOOGLE_SERVICE_ACCOUNT_FILE": str(tmp_path / name)}
        with pytest.raises(ValueError, match=said):
            Settings.from_env(env)
