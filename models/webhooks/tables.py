"""The webhook tables as Core tables, for the set-based statements of the delivery code."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table

from models.db.entities import WebhookDelivery, WebhookEndpoint, WebhookMessage

ENDPOINTS = cast(Table, WebhookEndpoint.__table__)
MESSAGES = cast(Table, WebhookMessage.__table__)
DELIVERIES = cast(Table, WebhookDelivery.__table__)
