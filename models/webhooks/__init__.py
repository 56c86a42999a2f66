"""Webhooks (C12): endpoints and events, delivery, tables, URL rules, secrets."""
