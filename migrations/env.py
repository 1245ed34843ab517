"""Alembic environment: migrates the connection that ``openab_voice.store.database.upgrade`` passes in.

There is no alembic.ini and no offline (``--sql``) mode: the caller owns the connection and its
transaction, so the URL (and its password) never passes through Alembic's configuration.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from openab_voice.store.models import Base

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError(
        "run migrations through openab_voice.store.database.upgrade (or `openab-voice db upgrade`)"
    )

context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
with context.begin_transaction():
    context.run_migrations()
