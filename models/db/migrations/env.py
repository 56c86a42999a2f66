"""Alembic environment: the connection is handed in by models.db.migrate."""

from alembic import context

from models.db.entities import Base

config = context.config
connection = config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
