"""The meeting record: recorded voice sessions and their transcript lines (OPENAB_TRANSCRIPT_STORE).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "voice_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("channel_id", sa.BigInteger(), nullable=False),
        sa.Column("channel_name", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("audience", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_voice_sessions")),
    )
    op.create_index(
        op.f("ix_voice_sessions_guild_id_started_at"), "voice_sessions", ["guild_id", "started_at"]
    )
    op.create_index(op.f("ix_voice_sessions_started_at"), "voice_sessions", ["started_at"])
    op.create_table(
        "transcript_lines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("speaker_id", sa.String(length=64), nullable=False),
        sa.Column("speaker_name", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("ended_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["voice_sessions.id"],
            name=op.f("fk_transcript_lines_session_id_voice_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_transcript_lines")),
    )
    op.create_index(
        op.f("ix_transcript_lines_session_id_started_at"), "transcript_lines", ["session_id", "started_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_transcript_lines_session_id_started_at"), table_name="transcript_lines")
    op.drop_table("transcript_lines")
    op.drop_index(op.f("ix_voice_sessions_started_at"), table_name="voice_sessions")
    op.drop_index(op.f("ix_voice_sessions_guild_id_started_at"), table_name="voice_sessions")
    op.drop_table("voice_sessions")
