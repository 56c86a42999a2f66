"""Search-engine notifications (C18): job pages told to IndexNow and Google's Indexing API."""
