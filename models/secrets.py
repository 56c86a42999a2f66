"""PROVISIONAL (branch `hooks` owns this module and replaces it on merge): webhook secrets
encrypted at rest with Fernet (C12), and the secrets that sign a message now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cryptography.fernet import Fernet

from models.settings import Settings


def load_key(settings: Settings) -> bytes:
    """JOBPOST_SECRET_KEY, else the key file under the var folder; neither: one line."""
    if settings.secret_key:
        return settings.secret_key.encode()
    path = settings.var_dir / "secret.key"
    if path.exists():
        return path.read_bytes().strip()
    raise RuntimeError("JOBPOST_SECRET_KEY is not set (and there is no var/secret.key)")


def encrypt(text: str, key: bytes) -> str:
    return Fernet(key).encrypt(text.encode()).decode()


def decrypt(token: str, key: bytes) -> str:
    return Fernet(key).decrypt(token.encode()).decode()


def signing_secrets(endpoint: Any, now: datetime, key: bytes) -> list[str]:
    """The current secret, and the previous one while it still signs (24 h after rotation)."""
    found = [decrypt(endpoint.secret, key)]
    until = endpoint.previous_secret_until
    if endpoint.previous_secret and until is not None and until > now:
        found.append(decrypt(endpoint.previous_secret, key))
    return found
