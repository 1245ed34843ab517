"""Initial job store schema: actions, their transitions, idempotency keys, workspaces, audit log.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=64), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("effect_hint", sa.String(length=64), nullable=False),
        sa.Column("effect_ceiling", sa.String(length=64), nullable=True),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("voice_channel_id", sa.BigInteger(), nullable=True),
        sa.Column("text_channel_id", sa.BigInteger(), nullable=False),
        sa.Column("session_generation", sa.Integer(), nullable=False),
        sa.Column("proposed_by", sa.BigInteger(), nullable=False),
        sa.Column("proposal_message_id", sa.BigInteger(), nullable=True),
        sa.Column("confirmed_by", sa.BigInteger(), nullable=True),
        sa.Column("workspace_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("result_text", sa.Text(), nullable=True),
        sa.Column("stop_reason", sa.String(length=64), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("delivery_outcome", sa.String(length=200), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_actions")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_actions_idempotency_key")),
    )
    op.create_index(op.f("ix_actions_guild_id_created_at"), "actions", ["guild_id", "created_at"])
    op.create_index(op.f("ix_actions_status_created_at"), "actions", ["status", "created_at"])

    op.create_table(
        "action_transitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=64), nullable=False),
        sa.Column("from_status", sa.String(length=64), nullable=True),
        sa.Column("to_status", sa.String(length=64), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["action_id"], ["actions.id"], name=op.f("fk_action_transitions_action_id_actions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_action_transitions")),
    )
    op.create_index(op.f("ix_action_transitions_action_id"), "action_transitions", ["action_id"])

    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("action_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["action_id"], ["actions.id"], name=op.f("fk_idempotency_keys_action_id_actions")
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index(op.f("ix_idempotency_keys_action_id"), "idempotency_keys", ["action_id"])

    op.create_table(
        "workspaces",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=64), nullable=False),
        sa.Column("action_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspaces")),
    )

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=64), nullable=True),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_action_id"), "audit_log", ["action_id"])
    op.create_index(op.f("ix_audit_log_kind"), "audit_log", ["kind"])


def downgrade() -> None:
    op.drop_table("audit_log")
    op.drop_table("workspaces")
    op.drop_table("idempotency_keys")
    op.drop_table("action_transitions")
    op.drop_table("actions")
