"""Immutable records the store hands to callers (never ORM objects, which are bound to a session)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict

from openab_voice.jobs import EffectCeiling, JobStatus

# The ``event`` of the transition row written when an action is created (it has no JobEvent).
CREATE_EVENT = "create"


class WorkspaceState(StrEnum):
    """Whether a workspace can take a new action. Stored in the database: keep values stable."""

    FREE = "free"
    BUSY = "busy"
    QUARANTINED = "quarantined"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAction:
    """What the broker knows when it records a proposal; the store adds status, times and version.

    Attributes:
        id: Broker-minted action id (e.g. ``a-1f3c9e2b``).
        goal: The task in the requester's words.
        effect_hint: The effect ceiling the model asked for (the operator fixes the real one).
        guild_id: Discord guild the request came from.
        text_channel_id: Control channel where the proposal is posted.
        session_generation: Voice-session generation that minted the request.
        voice_session_id: Random id of that voice session (unique across restarts, unlike the
            generation), or None for a request from no voice session.
        proposed_by: Discord user id of the speaker.
        expires_at: Wall-clock epoch seconds after which an unconfirmed proposal expires.
        voice_channel_id: Voice channel of the speaker, if any.
        workspace_id: Workspace the action will run in, if already chosen.
        idempotency_key: Makes ``create`` return the existing action on a repeat.
    """

    id: str
    goal: str
    effect_hint: EffectCeiling
    guild_id: int
    text_channel_id: int
    session_generation: int
    proposed_by: int
    expires_at: float
    voice_channel_id: int | None = None
    workspace_id: str | None = None
    idempotency_key: str | None = None
    voice_session_id: str | None = None


class ActionFields(TypedDict, total=False):
    """Columns a caller may set with ``JobStore.apply`` or ``JobStore.update``."""

    proposal_message_id: int | None
    effect_ceiling: EffectCeiling | None
    confirmed_by: int | None
    workspace_id: str | None
    result_text: str | None
    stop_reason: str | None
    error_code: str | None
    detail: str | None
    delivery_outcome: str | None
    lease_owner: str | None
    lease_until: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRecord:
    """One action as stored; ``version`` is the compare-and-set token for the next write."""

    id: str
    idempotency_key: str | None
    status: JobStatus
    goal: str
    effect_hint: EffectCeiling
    effect_ceiling: EffectCeiling | None
    guild_id: int
    voice_channel_id: int | None
    text_channel_id: int
    session_generation: int
    voice_session_id: str | None
    proposed_by: int
    proposal_message_id: int | None
    confirmed_by: int | None
    workspace_id: str | None
    created_at: float
    updated_at: float
    expires_at: float
    version: int
    result_text: str | None
    stop_reason: str | None
    error_code: str | None
    detail: str | None
    delivery_outcome: str | None
    lease_owner: str | None
    lease_until: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionRecord:
    """One status change; ``event`` is a ``JobEvent`` value, or ``"create"`` for the first row."""

    id: int
    action_id: str
    from_status: JobStatus | None
    to_status: JobStatus
    event: str
    actor: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord:
    """One audit log entry; ``detail`` is the JSON object it was written with."""

    id: int
    kind: str
    actor: str
    action_id: str | None
    detail: Mapping[str, object]
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceRecord:
    """A workspace and, while busy or quarantined, the action that holds it."""

    id: str
    path: str
    state: WorkspaceState
    action_id: str | None
    reason: str | None
    updated_at: float
    version: int


class WorkerState(StrEnum):
    """What an executor worker is doing. Stored in the database: keep values stable."""

    RUNNING = "running"
    DRAINING = "draining"  # SIGTERM: claims nothing new, settles what it holds
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerRecord:
    """An executor worker as it last reported itself (heartbeats renew ``heartbeat_at``)."""

    id: str
    node: str
    state: WorkerState
    started_at: float
    heartbeat_at: float
    running: int
