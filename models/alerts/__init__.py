"""Job alerts (C19): subscriptions to a search of the public jobs, by double opt-in."""
