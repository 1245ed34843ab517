"""Conversion of ORM rows (bound to a session) into the immutable records handed to callers."""

from __future__ import annotations

from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.store.models import Action, ActionTransition, AuditEntry, Workspace
from openab_voice.store.records import (
    ActionRecord,
    AuditRecord,
    TransitionRecord,
    WorkspaceRecord,
    WorkspaceState,
)


def action_record(row: Action) -> ActionRecord:
    """The immutable record of an action row."""
    return ActionRecord(
        id=row.id,
        idempotency_key=row.idempotency_key,
        status=JobStatus(row.status),
        goal=row.goal,
        effect_hint=EffectCeiling(row.effect_hint),
        effect_ceiling=None if row.effect_ceiling is None else EffectCeiling(row.effect_ceiling),
        guild_id=row.guild_id,
        voice_channel_id=row.voice_channel_id,
        text_channel_id=row.text_channel_id,
        session_generation=row.session_generation,
        voice_session_id=row.voice_session_id,
        proposed_by=row.proposed_by,
        proposal_message_id=row.proposal_message_id,
        confirmed_by=row.confirmed_by,
        workspace_id=row.workspace_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        version=row.version,
        result_text=row.result_text,
        stop_reason=row.stop_reason,
        error_code=row.error_code,
        detail=row.detail,
        delivery_outcome=row.delivery_outcome,
        lease_owner=row.lease_owner,
        lease_until=row.lease_until,
    )


def transition_record(row: ActionTransition) -> TransitionRecord:
    """The immutable record of a transition row."""
    return TransitionRecord(
        id=row.id,
        action_id=row.action_id,
        from_status=None if row.from_status is None else JobStatus(row.from_status),
        to_status=JobStatus(row.to_status),
        event=row.event,
        actor=row.actor,
        reason=row.reason,
        at=row.at,
    )


def workspace_record(row: Workspace) -> WorkspaceRecord:
    """The immutable record of a workspace row."""
    return WorkspaceRecord(
        id=row.id,
        path=row.path,
        state=WorkspaceState(row.state),
        action_id=row.action_id,
        reason=row.reason,
        updated_at=row.updated_at,
        version=row.version,
    )


def audit_record(row: AuditEntry) -> AuditRecord:
    """The immutable record of an audit row."""
    return AuditRecord(
        id=row.id, kind=row.kind, actor=row.actor, action_id=row.action_id, detail=row.detail, at=row.at
    )
