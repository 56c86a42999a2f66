"""Sync runs (C11): intake, lease and apply, batches and digests."""
