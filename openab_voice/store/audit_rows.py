"""Audit log rows inside a caller's transaction, and their records."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from openab_voice.store.convert import audit_record
from openab_voice.store.models import AuditEntry
from openab_voice.store.records import AuditRecord


def add_audit(
    session: Session,
    *,
    now: float,
    kind: str,
    actor: str,
    action_id: str | None,
    detail: Mapping[str, object] | None,
) -> None:
    """Add one audit row to the caller's transaction; ``detail`` must be JSON-serializable."""
    session.add(AuditEntry(kind=kind, actor=actor, action_id=action_id, detail=dict(detail or {}), at=now))


def audit_entries(session: Session, *, action_id: str | None, kind: str | None) -> list[AuditRecord]:
    """Audit rows matching the filters given, oldest first."""
    query = select(AuditEntry).order_by(AuditEntry.id)
    if action_id is not None:
        query = query.where(AuditEntry.action_id == action_id)
    if kind is not None:
        query = query.where(AuditEntry.kind == kind)
    return [audit_record(row) for row in session.scalars(query)]
