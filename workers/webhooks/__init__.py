"""Webhook delivery by the workers (C12): signing, the pinned HTTP client, the task's steps."""
