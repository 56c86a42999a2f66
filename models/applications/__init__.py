"""Applications (C8): the submission, résumés, the mail outbox, privacy."""
