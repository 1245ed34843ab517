"""The voice session that heard a request, by its random id (durable, unlike the generation counter).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # batch_alter_table: SQLite cannot ALTER most things in place (adding a nullable column it can,
    # but batch keeps one code path for both backends).
    with op.batch_alter_table("actions") as batch:
        batch.add_column(sa.Column("voice_session_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.drop_column("voice_session_id")
