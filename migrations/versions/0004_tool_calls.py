"""The ToolRouter's audit: one row per tool call of the voice model.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=True),
        sa.Column("turn_id", sa.String(length=64), nullable=True),
        sa.Column("call_id", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=64), nullable=False),
        sa.Column("risk", sa.String(length=64), nullable=True),
        sa.Column("speaker_id", sa.String(length=64), nullable=True),
        sa.Column("confirmation", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("duration_ms", sa.Double(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
    )
    op.create_index(op.f("ix_tool_calls_session_id_at"), "tool_calls", ["session_id", "at"])
    op.create_index(op.f("ix_tool_calls_tool"), "tool_calls", ["tool"])


def downgrade() -> None:
    op.drop_index(op.f("ix_tool_calls_tool"), table_name="tool_calls")
    op.drop_index(op.f("ix_tool_calls_session_id_at"), table_name="tool_calls")
    op.drop_table("tool_calls")
