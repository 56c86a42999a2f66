"""Signing as the Standard Webhooks specification says (C12), with its own library.

`webhook-signature` is `v1,<base64 HMAC-SHA256>` over `{id}.{timestamp}.{body}`, keyed with
the secret's decoded bytes; while a rotated secret's previous one is still valid, both sign,
separated by a space, so receivers verifying with either secret accept the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook


def headers(
    message_id: str, body: bytes, secrets: Sequence[str], *, at: datetime
) -> dict[str, str]:
    """The headers of one attempt made `at` (its own timestamp, in Unix seconds)."""
    moment = datetime.fromtimestamp(int(at.timestamp()), tz=UTC)
    text = body.decode()
    signatures = [Webhook(secret).sign(message_id, moment, text) for secret in secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": " ".join(signatures),
        "Content-Type": "application/json",
    }
