"""Leases decide: an index to find expired leases of running jobs, and the executor worker registry.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The lease columns exist since 0001 (claim_next wrote them); the reaper and restart
    # reconciliation now scan running jobs by expiry.
    op.create_index(op.f("ix_actions_status_lease_until"), "actions", ["status", "lease_until"])
    op.create_table(
        "executor_workers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("node", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("heartbeat_at", sa.Double(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_executor_workers")),
    )
    op.create_index(op.f("ix_executor_workers_node"), "executor_workers", ["node"])


def downgrade() -> None:
    op.drop_index(op.f("ix_executor_workers_node"), table_name="executor_workers")
    op.drop_table("executor_workers")
    op.drop_index(op.f("ix_actions_status_lease_until"), table_name="actions")
