"""Workspace rows inside a caller's transaction: one running action per workspace.

:class:`~openab_voice.store.jobs.JobStore` calls these within its own transaction, so restart
reconciliation can lose a job and quarantine its workspace atomically.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from openab_voice.store.audit_rows import add_audit
from openab_voice.store.convert import workspace_record
from openab_voice.store.models import Workspace
from openab_voice.store.records import WorkspaceRecord, WorkspaceState


def acquire(session: Session, *, now: float, workspace_id: str, path: str, action_id: str) -> bool:
    """Make the workspace busy for ``action_id``; False when it is busy or quarantined.

    Raises:
        sqlalchemy.exc.IntegrityError: when a concurrent transaction created the row first (the
            caller's transaction is then unusable; the other action holds the workspace).
    """
    current = session.execute(
        select(Workspace.state, Workspace.version).where(Workspace.id == workspace_id)
    ).one_or_none()
    if current is None:
        session.add(
            Workspace(
                id=workspace_id,
                path=path,
                state=WorkspaceState.BUSY.value,
                action_id=action_id,
                reason=None,
                updated_at=now,
                version=1,
            )
        )
        session.flush()
        return True
    if current.state != WorkspaceState.FREE:
        return False
    # Compare-and-set on state and version: of two actions that both saw it free, one wins.
    return _update(
        session,
        (
            Workspace.id == workspace_id,
            Workspace.state == WorkspaceState.FREE.value,
            Workspace.version == current.version,
        ),
        state=WorkspaceState.BUSY.value,
        path=path,
        action_id=action_id,
        reason=None,
        updated_at=now,
        version=current.version + 1,
    )


def release(session: Session, *, now: float, workspace_id: str, action_id: str) -> bool:
    """Free the workspace if ``action_id`` holds it busy; a quarantined one stays quarantined."""
    # One conditional UPDATE is the compare-and-set: it matches only while this action holds it busy.
    return _update(
        session,
        (
            Workspace.id == workspace_id,
            Workspace.state == WorkspaceState.BUSY.value,
            Workspace.action_id == action_id,
        ),
        state=WorkspaceState.FREE.value,
        action_id=None,
        reason=None,
        updated_at=now,
        version=Workspace.version + 1,
    )


def quarantine(
    session: Session, *, now: float, workspace_id: str, action_id: str, reason: str, actor: str
) -> None:
    """Quarantine the workspace whatever its state (nobody knows what is in it), and audit it."""
    # Unconditional on purpose: quarantine overrides free and busy alike; the version still moves.
    found = _update(
        session,
        (Workspace.id == workspace_id,),
        state=WorkspaceState.QUARANTINED.value,
        action_id=action_id,
        reason=reason,
        updated_at=now,
        version=Workspace.version + 1,
    )
    if not found:
        # Never acquired through the store, so its path is unknown; the row still blocks acquisition.
        session.add(
            Workspace(
                id=workspace_id,
                path="",
                state=WorkspaceState.QUARANTINED.value,
                action_id=action_id,
                reason=reason,
                updated_at=now,
                version=1,
            )
        )
    add_audit(
        session,
        now=now,
        kind="workspace.quarantined",
        actor=actor,
        action_id=action_id,
        detail={"workspace_id": workspace_id, "reason": reason},
    )


def reconcile(session: Session, *, now: float, workspace_id: str, actor: str) -> bool:
    """Free a quarantined workspace after someone checked it, and audit it; False if not quarantined."""
    current = session.execute(select(Workspace).where(Workspace.id == workspace_id)).scalar_one_or_none()
    if current is None or current.state != WorkspaceState.QUARANTINED:
        return False
    freed = _update(
        session,
        (
            Workspace.id == workspace_id,
            Workspace.state == WorkspaceState.QUARANTINED.value,
            Workspace.version == current.version,
        ),
        # Leave ``current`` as it was: its action and reason go into the audit entry.
        keep_loaded=True,
        state=WorkspaceState.FREE.value,
        action_id=None,
        reason=None,
        updated_at=now,
        version=current.version + 1,
    )
    if not freed:
        return False
    add_audit(
        session,
        now=now,
        kind="workspace.reconciled",
        actor=actor,
        action_id=current.action_id,
        detail={"workspace_id": workspace_id, "quarantine_reason": current.reason},
    )
    return True


def _update(
    session: Session, where: tuple[ColumnElement[bool], ...], *, keep_loaded: bool = False, **values: Any
) -> bool:
    """One conditional UPDATE of the workspace row (the compare-and-set); whether a row matched.

    ``keep_loaded`` leaves rows already loaded in ``session`` as they were.
    """
    statement = update(Workspace).where(*where).values(**values).returning(Workspace.id)
    if keep_loaded:
        statement = statement.execution_options(synchronize_session=False)
    return session.execute(statement).scalar_one_or_none() is not None


def get(session: Session, workspace_id: str) -> WorkspaceRecord | None:
    """The workspace's row, or None if the store has never seen it."""
    row = session.get(Workspace, workspace_id)
    return None if row is None else workspace_record(row)


def quarantined(session: Session) -> list[WorkspaceRecord]:
    """Every quarantined workspace, oldest quarantine first."""
    rows = session.scalars(
        select(Workspace)
        .where(Workspace.state == WorkspaceState.QUARANTINED.value)
        .order_by(Workspace.updated_at, Workspace.id)
    )
    return [workspace_record(row) for row in rows]
