"""Bus events of the action plane. Goals and results are truncated by :func:`sanitize`; no secret is kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openab_voice.bus.events import Event, sanitize


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionChanged(Event):
    """An action's status changed (written to the store first). ``session_id``: the voice session it
    was asked in (its claims and its channel's status follow it), None when unknown."""

    action_id: str
    status: str
    previous: str | None
    actor: str
    reason: str = ""
    goal: str = ""
    proposed_by: str = ""
    effect_ceiling: str | None = None
    stage: str = "actions"

    def __post_init__(self) -> None:
        object.__setattr__(self, "goal", sanitize(self.goal))


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRequestRefused(Event):
    """A request never became an action (unattributed, not the operator, actions off ...)."""

    code: str
    speaker_id: str | None
    source: str
    goal: str = ""
    stage: str = "actions"

    def __post_init__(self) -> None:
        object.__setattr__(self, "goal", sanitize(self.goal))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationRefused(Event):
    """A Confirm / Reject click or a cancel was refused; the refusal is audited too."""

    action_id: str
    user_id: str
    code: str
    stage: str = "actions"


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecided(Event):
    """The fail-closed resolver answered one of the agent's permission requests."""

    action_id: str
    decision: dict[str, Any] = field(default_factory=dict)
    stage: str = "acp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", sanitize(self.decision))


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentProcessStarted(Event):
    """A fresh agent process was spawned for an action (``confirm_to_spawn_ms`` since the click)."""

    action_id: str
    pid: int
    confirm_to_spawn_ms: float | None
    stage: str = "acp"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentPromptSent(Event):
    """The goal was sent to the agent: from here on, a lost agent means ``outcome_unknown``."""

    action_id: str
    stage: str = "acp"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentToolCall(Event):
    """The agent announced or updated a tool call (its own description: untrusted, for observers).

    Published synchronously from the ACP client's handler, before the agent's next message is read.
    """

    action_id: str
    tool_call_id: str
    kind: str | None
    status: str | None
    stage: str = "acp"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionResultPosted(Event):
    """The result went to the text channel (or failed to); speech follows only when it did."""

    action_id: str
    execution: str
    delivered: bool
    messages: int
    stage: str = "actions"
