"""The values the ACP executor takes and returns: frozen, slotted, keyword-only dataclasses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from openab_voice.jobs import EffectCeiling

if TYPE_CHECKING:
    from openab_voice.acp.pod import PodLauncher
    from openab_voice.acp.sandbox import Sandbox


class ExecutionOutcome(StrEnum):
    """What the agent's turn did, as far as anyone can know. Values are stored: keep them stable."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # After the prompt was sent, nobody can tell what happened (timeout, EOF, crash, unconfirmed
    # cancel): never re-run, and the workspace stays quarantined until an operator reconciles it.
    OUTCOME_UNKNOWN = "outcome_unknown"


class DeliveryOutcome(StrEnum):
    """Whether the result reached the text channel: independent of :class:`ExecutionOutcome`."""

    NOT_ATTEMPTED = "not_attempted"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    """Where one action's agent works.

    Attributes:
        id: What "one running action per workspace" is enforced on: ``scratch:<action id>`` for a
            fresh directory, ``repo:<resolved repository path>`` for a worktree of the configured repo.
        action_id: The action this workspace was prepared for.
        path: The working tree (the agent's cwd and the only place ``workspace_write`` may touch).
        private: Ours, outside the working tree: the agent's throwaway HOME and TMPDIR, its stderr log
            and the quarantine marker.
        repo: The repository this is a worktree of, or None for a fresh empty directory.
    """

    id: str
    action_id: str
    path: Path
    private: Path
    repo: Path | None = None

    @property
    def home(self) -> Path:
        """The agent's throwaway ``HOME`` (Codex writes its key to ``$HOME/.codex``)."""
        return self.private / "home"

    @property
    def tmp(self) -> Path:
        """The agent's throwaway ``TMPDIR``."""
        return self.private / "tmp"

    @property
    def logs(self) -> Path:
        """Where the agent's stderr goes."""
        return self.private / "logs"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """Everything one agent run needs; fixed when the operator confirmed the action.

    Attributes:
        action_id: The confirmed action.
        goal: The confirmed goal text, sent as the single prompt.
        effect_ceiling: The most the agent may do; permission requests above it are rejected.
        workspace: A prepared :class:`Workspace`.
        command: The agent command line, already shell-split (``shlex.split`` of the setting).
        env_allowlist: Names copied from ``environ`` into the agent's environment; nothing else is.
        environ: Where allowlisted values are read from (usually ``os.environ``). Never printed.
        credentials: The agent's own credentials, ``(NAME, SOURCE)`` pairs of ``OPENAB_ACP_ENV``
            (see :func:`~openab_voice.acp.spawn.agent_environment`).
        auth_method: ACP ``authenticate`` method id sent before ``session/new``, if the agent offers it.
        sandbox: Run the agent in this bubblewrap sandbox (None: process group containment only).
        pods: Run the agent in a fresh Kubernetes pod made by this launcher instead of a local process.
        turn_timeout_s: Longest prompt turn; past it the agent is stopped and the outcome is unknown.
        cancel_grace_s: How long a cancelled agent gets to confirm with ``cancelled`` before it is killed.
        startup_timeout_s: Bound on ``initialize`` + ``session/new`` (nothing asked of the agent yet).
    """

    action_id: str
    goal: str
    effect_ceiling: EffectCeiling
    workspace: Workspace
    command: tuple[str, ...]
    env_allowlist: tuple[str, ...]
    environ: Mapping[str, str] = field(repr=False)
    credentials: tuple[tuple[str, str], ...] = ()
    auth_method: str | None = None
    sandbox: Sandbox | None = None
    pods: PodLauncher | None = None
    turn_timeout_s: float
    cancel_grace_s: float
    startup_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.command or not self.command[0]:
            raise ValueError("command must name a program")
        if self.sandbox is not None and self.pods is not None:
            raise ValueError("an agent runs in a sandbox or in a pod, not both")
        for name in ("turn_timeout_s", "cancel_grace_s", "startup_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionDecision:
    """How one ``session/request_permission`` was answered, and why (kept for the audit).

    Attributes:
        tool_call_id: The agent's tool call id.
        title: The tool call's title as the agent described it (untrusted, for display).
        kind: The ACP tool kind the decision was based on, or None when the agent gave none.
        needed: The effect the tool call needs by our (fail-closed) reading of it.
        offered: The option kinds the agent offered, in its order.
        outcome: ``selected`` (an option was chosen) or ``cancelled`` (ACP's "no choice" outcome).
        option_id: The chosen option's id, when one was selected.
        option_kind: ``allow_once`` or ``reject_once``; never a persistent option.
        reason: Why, in one sentence.
    """

    tool_call_id: str
    title: str
    kind: str | None
    needed: EffectCeiling
    offered: tuple[str, ...]
    outcome: Literal["selected", "cancelled"]
    option_id: str | None
    option_kind: Literal["allow_once", "reject_once"] | None
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompletion:
    """The result of one agent run.

    Attributes:
        action_id: The action.
        execution: What the turn did, as far as anyone can know.
        stop_reason: The ACP stop reason the agent answered the prompt with, if it answered.
        output: The agent's message text (its message chunks, concatenated; bounded).
        error_code: A stable ``ACP_*`` code when the run did not succeed, else None.
        detail: One line for people: what happened, whether the process group was quiescent, where
            the agent's stderr log is.
        prompt_sent: Whether the goal was (or may have been) handed to the agent. False proves
            nothing was asked of it.
        permission_decisions: Every permission request and how it was answered, in order.
        delivery: Whether the result reached the text channel (the caller fills this in).
        quarantined: The workspace must be quarantined until an operator reconciles it; the caller
            persists that (``WorkspaceManager.quarantine``).
    """

    action_id: str
    execution: ExecutionOutcome
    stop_reason: str | None
    output: str
    error_code: str | None
    detail: str
    prompt_sent: bool
    permission_decisions: tuple[PermissionDecision, ...]
    delivery: DeliveryOutcome = DeliveryOutcome.NOT_ATTEMPTED
    quarantined: bool
