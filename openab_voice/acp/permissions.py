"""The fail-closed permission resolver: pure, one decision per ``session/request_permission``.

A tool call's kind and locations are the agent's own description of it; ACP gives us nothing better.
We read them pessimistically (an unknown, missing or effectful kind needs ``external``; a write needs
every location inside the workspace) and answer only with a challenge-provided ``allow_once`` or
``reject_once`` option (RFC "fresh ACP connection per action": persistent options would outlive the
confirmed action). When the right once-option is not offered we answer ACP's ``cancelled`` outcome,
which grants nothing. Containment (own HOME/TMPDIR, process group, the executor pod) is the backstop
for an agent that mislabels its tools.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from openab_voice.acp.types import PermissionDecision
from openab_voice.jobs import EffectCeiling

# Kinds that only look: reading files, searching, thinking. ``fetch`` reaches the network: external.
READ_ONLY_KINDS = frozenset({"read", "search", "think"})
# Kinds that change files: workspace_write only when every location is inside the workspace.
WRITE_KINDS = frozenset({"edit", "delete", "move"})

OnceKind = Literal["allow_once", "reject_once"]


def needed_effect(
    tool_call: ToolCallUpdate, workspace: Path, *, sandboxed: bool = False
) -> tuple[EffectCeiling, str]:
    """The effect ``tool_call`` needs by a fail-closed reading, and why.

    Args:
        tool_call: The tool call as the permission request (merged with its announcement) gives it.
        workspace: The working tree; writes anywhere else are external effects.
        sandboxed: The agent runs in the sandbox (``acp/sandbox.py``), where a command can write
            only the working tree: ``execute`` then needs ``workspace_exec``, else ``external``.

    Returns:
        The needed effect level and a short reason.
    """
    kind = tool_call.kind
    if kind in READ_ONLY_KINDS:
        return EffectCeiling.READ_ONLY, f"kind {kind} only reads"
    if kind in WRITE_KINDS:
        paths = [location.path for location in tool_call.locations or ()]
        if not paths:
            return EffectCeiling.EXTERNAL, f"kind {kind} names no location, so it may write anywhere"
        outside = [path for path in paths if not is_inside(path, workspace)]
        if outside:
            return EffectCeiling.EXTERNAL, f"kind {kind} touches {outside[0]!r} outside the workspace"
        return EffectCeiling.WORKSPACE_WRITE, f"kind {kind} touches only the workspace"
    if kind is None:
        return EffectCeiling.EXTERNAL, "no tool kind given, so anything is possible"
    if kind == "execute" and sandboxed:
        return EffectCeiling.WORKSPACE_EXEC, "kind execute runs a command inside the sandbox"
    # execute, fetch, other, switch_mode (and any kind a later protocol version adds).
    return EffectCeiling.EXTERNAL, f"kind {kind} may have effects outside the workspace"


def resolve(
    tool_call: ToolCallUpdate,
    options: Sequence[PermissionOption],
    ceiling: EffectCeiling,
    *,
    workspace: Path,
    sandboxed: bool = False,
) -> PermissionDecision:
    """Answer one permission request within ``ceiling``, fail closed.

    Args:
        tool_call: The tool call asking for permission.
        options: The options the agent offered.
        ceiling: The effect ceiling the operator confirmed.
        workspace: The working tree.
        sandboxed: The agent runs in the sandbox (see :func:`needed_effect`).

    Returns:
        The decision: ``allow_once`` if the needed effect is within the ceiling, else ``reject_once``;
        ``cancelled`` when that once-option is not offered. Never ``allow_always`` / ``reject_always``.
    """
    needed, why = needed_effect(tool_call, workspace, sandboxed=sandboxed)
    wanted: OnceKind
    if ceiling.allows(needed):
        wanted, verdict = "allow_once", f"{why}; {needed.value} is within the {ceiling.value} ceiling"
    else:
        wanted, verdict = "reject_once", f"{why}; {needed.value} exceeds the {ceiling.value} ceiling"
    chosen = next((option for option in options if option.kind == wanted), None)
    if chosen is None:
        reason = f"{verdict}, but no {wanted} option was offered: cancelled"
        return _decision(tool_call, options, needed, None, reason)
    return _decision(tool_call, options, needed, (chosen.option_id, wanted), verdict)


def cancelled(
    tool_call: ToolCallUpdate, options: Sequence[PermissionOption], *, workspace: Path, reason: str
) -> PermissionDecision:
    """A ``cancelled`` answer that grants nothing, whatever the request needs.

    Used while a cancel is in progress (the ACP prompt-turn spec requires the client to answer
    permission requests with ``cancelled`` once it has sent ``session/cancel``) and for requests
    that do not belong to our session.
    """
    needed, _ = needed_effect(tool_call, workspace)
    return _decision(tool_call, options, needed, None, reason)


def to_response(decision: PermissionDecision) -> RequestPermissionResponse:
    """The ACP wire answer for ``decision``."""
    if decision.outcome == "selected" and decision.option_id is not None:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=decision.option_id)
        )
    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


def is_inside(path: str, root: Path) -> bool:
    """Whether ``path`` is ``root`` or below it, both lexically and after resolving symlinks.

    A relative path is refused: ACP locations are absolute, and a relative one could mean anything.
    The symlink check (read-only filesystem access) stops ``workspace/link -> /etc`` passing.
    """
    if not os.path.isabs(path):
        return False
    lexical = Path(os.path.normpath(path))
    root_lexical = Path(os.path.normpath(root))
    if not lexical.is_relative_to(root_lexical):
        return False
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def _decision(
    tool_call: ToolCallUpdate,
    options: Sequence[PermissionOption],
    needed: EffectCeiling,
    chosen: tuple[str, OnceKind] | None,
    reason: str,
) -> PermissionDecision:
    return PermissionDecision(
        tool_call_id=tool_call.tool_call_id,
        title=tool_call.title or "",
        kind=tool_call.kind,
        needed=needed,
        offered=tuple(option.kind for option in options),
        outcome="selected" if chosen is not None else "cancelled",
        option_id=chosen[0] if chosen is not None else None,
        option_kind=chosen[1] if chosen is not None else None,
        reason=reason,
    )
