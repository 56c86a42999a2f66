"""Webhook signing secrets, encrypted at rest with Fernet (C12).

The key is JOBPOST_SECRET_KEY, else the key file `<var_dir>/secret.key` that `make run` and
`jobpost dev` create. A copy of the database alone never gives a receiver's signing secret.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from models.core.settings import MAKE_KEY

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

KEY_FILE = "secret.key"
SECRET_PREFIX = "whsec_"


class MissingKey(RuntimeError):
    """Neither JOBPOST_SECRET_KEY nor the key file: webhook secrets can be neither written nor
    read. Its message is the one line a command stops with."""


class KeySource(Protocol):
    """Where the key comes from: Settings (JOBPOST_SECRET_KEY and the var folder)."""

    @property
    def secret_key(self) -> str | None: ...

    @property
    def var_dir(self) -> Path: ...


def valid_key(raw: str) -> bool:
    """Whether `raw` is a Fernet key: url-safe base64 of exactly 32 bytes."""
    try:
        return len(base64.urlsafe_b64decode(raw.encode("ascii"))) == 32 and len(raw) == 44
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return False


def key_path(settings: KeySource) -> Path:
    return settings.var_dir / KEY_FILE


def load_key(settings: KeySource) -> bytes:
    """JOBPOST_SECRET_KEY, else the key file; neither: MissingKey naming the variable."""
    if settings.secret_key:
        return settings.secret_key.encode("ascii")
    path = key_path(settings)
    if path.exists():
        raw = path.read_text().strip()
        if not valid_key(raw):
            raise MissingKey(f"{path} is not a Fernet key; set JOBPOST_SECRET_KEY")
        return raw.encode("ascii")
    raise MissingKey(
        f"JOBPOST_SECRET_KEY is not set (nor JOBPOST_SECRET_KEY_FILE, nor is there a key file "
        f"at {path}); make a key with `{MAKE_KEY}`"
    )


def ensure_key_file(settings: KeySource) -> Path | None:
    """Create the key file (owner-only) when no key is configured: `make run` and `jobpost
    dev` call this, so a local service works without setup. None when the variable is set."""
    if settings.secret_key:
        return None
    path = key_path(settings)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(_fernet_class().generate_key().decode("ascii") + "\n")
    return path


def new_secret() -> str:
    """A signing secret as C12 shows it: `whsec_` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def _fernet_class() -> type[Fernet]:
    """Imported on first use: cryptography adds 6 to 7 MB to a process, and a web process
    needs it only when an employer registers an endpoint or rotates its secret."""
    from cryptography.fernet import Fernet

    return Fernet


def encrypt(text: str, key: bytes) -> str:
    return _fernet_class()(key).encrypt(text.encode()).decode("ascii")


def decrypt(token: str, key: bytes) -> str:
    return _fernet_class()(key).decrypt(token.encode("ascii")).decode()


def signing_secrets(endpoint: Any, now: datetime, key: bytes) -> list[str]:
    """The secrets that sign a message sent now: the current one, and the previous one while
    it still signs (24 hours after a rotation, C12). `endpoint` has the columns of
    webhook_endpoints (an entity or a row)."""
    found = [decrypt(endpoint.secret, key)]
    until = endpoint.previous_secret_until
    if endpoint.previous_secret and until is not None and until > now:
        found.append(decrypt(endpoint.previous_secret, key))
    return found
