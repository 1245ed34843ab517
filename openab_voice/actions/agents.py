"""How this process starts an action's agent and hears from it.

:class:`AgentSettings` (the command, what the agent may see, its containment and time limits), the
:class:`~openab_voice.acp.types.TurnRequest` built for one confirmed job, and :class:`AgentHooks`, which
turn the turn driver's events into bus events and its permission decisions into audit entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openab_voice.acp.containment import Containment
from openab_voice.acp.pod import PodLauncher
from openab_voice.acp.types import PermissionDecision, TurnRequest, Workspace
from openab_voice.actions.events import AgentProcessStarted, AgentPromptSent, AgentToolCall, PermissionDecided
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.jobs import EffectCeiling
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """How agents are started: the command, what they may see, how long they may take."""

    command: tuple[str, ...]
    env_allowlist: tuple[str, ...]
    environ: Mapping[str, str]
    turn_timeout_s: float
    cancel_grace_s: float
    trusted_listener_ids: frozenset[int] = frozenset()
    credentials: tuple[tuple[str, str], ...] = ()  # OPENAB_ACP_ENV, parsed
    auth_method: str | None = None
    # What contains every agent (bubblewrap, a pod, or explicitly nothing); an unavailable one
    # refuses every action here too, whatever the broker let through.
    containment: Containment
    pods: PodLauncher | None = None  # makes the action pods when containment is ``pod``


def turn_request(record: ActionRecord, workspace: Workspace, agent: AgentSettings) -> TurnRequest:
    """What the turn driver is asked to run for ``record``, within its confirmed ceiling."""
    return TurnRequest(
        action_id=record.id,
        goal=record.goal,
        effect_ceiling=EffectCeiling(record.effect_ceiling or record.effect_hint),
        workspace=workspace,
        command=agent.command,
        env_allowlist=agent.env_allowlist,
        environ=agent.environ,
        credentials=agent.credentials,
        auth_method=agent.auth_method,
        sandbox=agent.containment.sandbox,
        pods=agent.pods,
        turn_timeout_s=agent.turn_timeout_s,
        cancel_grace_s=agent.cancel_grace_s,
    )


class AgentHooks:
    """The turn driver's ``on_event`` and ``on_decision`` for one action.

    Args:
        action_id: The action whose agent runs.
        confirmed_at: The clock's monotonic time of the confirming click (confirm -> spawn latency).
        store: Where permission decisions are audited.
        bus: Where the agent's events are published.
        clock: Event times.
    """

    def __init__(
        self, action_id: str, *, confirmed_at: float, store: JobStore, bus: EventBus, clock: Clock
    ) -> None:
        self._action_id = action_id
        self._confirmed_at = confirmed_at
        self._store = store
        self._bus = bus
        self._clock = clock

    def on_event(self, kind: str, data: dict[str, object]) -> None:
        """Publish the driver events the bus knows (prompt sent, tool call, process started)."""
        if kind == "prompt_sent":
            self._bus.publish(AgentPromptSent(at=self._clock.monotonic(), action_id=self._action_id))
        if kind == "tool_call":
            self._bus.publish(
                AgentToolCall(
                    at=self._clock.monotonic(),
                    action_id=self._action_id,
                    tool_call_id=str(data.get("tool_call_id", ""))[:200],
                    kind=None if data.get("kind") is None else str(data["kind"]),
                    status=None if data.get("status") is None else str(data["status"]),
                )
            )
        if kind == "process_started":
            self._bus.publish(
                AgentProcessStarted(
                    at=self._clock.monotonic(),
                    action_id=self._action_id,
                    pid=int(str(data.get("pid", 0))),
                    confirm_to_spawn_ms=(self._clock.monotonic() - self._confirmed_at) * 1000.0,
                )
            )

    def on_decision(self, decision: PermissionDecision) -> None:
        """Publish and audit one permission decision."""
        detail = decision_dict(decision)
        self._bus.publish(
            PermissionDecided(at=self._clock.monotonic(), action_id=self._action_id, decision=detail)
        )
        # Audited synchronously from the agent's callback: a decision is never lost to a crash later.
        self._store.audit("permission", actor="resolver", action_id=self._action_id, detail=detail)


def decision_dict(decision: PermissionDecision) -> dict[str, Any]:
    """A permission decision as its audit entry's detail (read back by ``remote.decision_of``)."""
    return {
        "tool_call_id": decision.tool_call_id,
        "title": decision.title,
        "kind": decision.kind,
        "needed": decision.needed.value,
        "offered": list(decision.offered),
        "outcome": decision.outcome,
        "option_kind": decision.option_kind,
        "reason": decision.reason,
    }
