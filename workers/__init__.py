"""Background work of jobpost: Celery tasks, delivery of application copies, the CLI."""
