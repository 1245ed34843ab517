"""Our side of the ACP connection (``acp.Client``): records the turn, answers permissions fail-closed.

The client offers the agent nothing but permission answers: no ``fs/*`` and no ``terminal/*``
capability is advertised in ``initialize`` (the agent works in its own cwd with its own tools), and
if an agent calls those methods anyway it gets a JSON-RPC "method not found" error.

Handlers never await: the SDK runs each incoming message in its own task, so a handler without an
await point keeps message chunks in arrival order and leaves no permission request pending across a
``session/cancel`` (the spec requires pending requests to be answered ``cancelled`` after a cancel;
ours are answered before the next message is read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.interfaces import Agent
from acp.schema import (
    AgentMessageChunk,
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CreateElicitationResponse,
    CreateTerminalResponse,
    CurrentModeUpdate,
    ElicitationMode,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    SessionInfoUpdate,
    TerminalOutputResponse,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from openab_voice.acp import permissions
from openab_voice.acp.types import PermissionDecision
from openab_voice.jobs import EffectCeiling

DecisionHook = Callable[[PermissionDecision], None]
ToolCallHook = Callable[["ToolCallRecord"], None]

MAX_OUTPUT_CHARS = 200_000
_TRUNCATED = "\n[output truncated]"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """The latest known state of one of the agent's tool calls (its own description: untrusted)."""

    tool_call_id: str
    title: str
    kind: str | None
    status: str | None
    locations: tuple[str, ...]


class ActionClient:
    """The ``acp.Client`` of one action run.

    Args:
        ceiling: The confirmed effect ceiling.
        workspace: The working tree (writes elsewhere need ``external``).
        on_decision: Called with every permission decision, in order (audit). Must not raise.
        on_tool_call: Called with every tool call announcement or update. Must not raise.
        max_output_chars: Bound on the collected message text.
        sandboxed: The agent runs in the sandbox (``execute`` then needs only ``workspace_exec``).
    """

    def __init__(
        self,
        *,
        ceiling: EffectCeiling,
        workspace: Path,
        on_decision: DecisionHook | None = None,
        on_tool_call: ToolCallHook | None = None,
        max_output_chars: int = MAX_OUTPUT_CHARS,
        sandboxed: bool = False,
    ) -> None:
        self._sandboxed = sandboxed
        self._ceiling = ceiling
        self._workspace = workspace
        self._on_decision = on_decision
        self._on_tool_call = on_tool_call
        self._max_output = max_output_chars
        self._chunks: list[str] = []
        self._length = 0
        self._truncated = False
        self._decisions: list[PermissionDecision] = []
        self._tool_calls: dict[str, ToolCallRecord] = {}
        self._cancelling = False
        self.session_id: str | None = None
        """Set by the driver once ``session/new`` answered; requests for any other session are refused."""

    @property
    def output(self) -> str:
        """The agent's message text so far."""
        return "".join(self._chunks) + (_TRUNCATED if self._truncated else "")

    @property
    def decisions(self) -> tuple[PermissionDecision, ...]:
        """Every permission decision so far, in order."""
        return tuple(self._decisions)

    @property
    def tool_calls(self) -> tuple[ToolCallRecord, ...]:
        """The latest state of every tool call seen, in first-seen order."""
        return tuple(self._tool_calls.values())

    def begin_cancel(self) -> None:
        """From now on answer every permission request ``cancelled`` (``session/cancel`` was sent)."""
        self._cancelling = True

    # --- the two methods an agent needs ---

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        """Answer a permission request through the fail-closed resolver."""
        merged = self._merge(tool_call)
        if self._cancelling:
            decision = permissions.cancelled(
                merged, options, workspace=self._workspace, reason="a cancel is in progress: cancelled"
            )
        elif self.session_id is None or session_id != self.session_id:
            decision = permissions.cancelled(
                merged,
                options,
                workspace=self._workspace,
                reason=f"not our session ({session_id!r}): cancelled",
            )
        else:
            decision = permissions.resolve(
                merged, options, self._ceiling, workspace=self._workspace, sandboxed=self._sandboxed
            )
        self._decisions.append(decision)
        if self._on_decision is not None:
            self._on_decision(decision)
        return permissions.to_response(decision)

    async def session_update(
        self,
        session_id: str,
        update: UserMessageChunk
        | AgentMessageChunk
        | AgentThoughtChunk
        | ToolCallStart
        | ToolCallProgress
        | AgentPlanUpdate
        | AgentPlanContentUpdate
        | AgentPlanRemovedUpdate
        | AvailableCommandsUpdate
        | CurrentModeUpdate
        | ConfigOptionUpdate
        | SessionInfoUpdate
        | UsageUpdate,
        **kwargs: Any,
    ) -> None:
        """Collect message text and tool call state; everything else is ignored."""
        if session_id != self.session_id:
            return
        if isinstance(update, AgentMessageChunk):
            if isinstance(update.content, TextContentBlock):
                self._append(update.content.text)
        elif isinstance(update, ToolCallStart | ToolCallProgress):
            self._record_tool_call(update)

    # --- offered to nobody: we advertise neither fs nor terminal ---

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        """Not offered."""
        raise RequestError.method_not_found("fs/write_text_file")

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        """Not offered."""
        raise RequestError.method_not_found("fs/read_text_file")

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        """Not offered."""
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        """Not offered."""
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        """Not offered."""
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        """Not offered."""
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse | None:
        """Not offered."""
        raise RequestError.method_not_found("terminal/kill")

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        """Not offered: nobody is at a keyboard to answer the agent's questions."""
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        """Ignored (we never accept elicitations)."""

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """No extensions are offered."""
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are ignored."""

    def on_connect(self, conn: Agent) -> None:
        """Nothing to do: the driver holds the connection."""

    # --- internals ---

    def _append(self, text: str) -> None:
        room = self._max_output - self._length
        if room <= 0:
            self._truncated = self._truncated or bool(text)
            return
        if len(text) > room:
            text, self._truncated = text[:room], True
        self._chunks.append(text)
        self._length += len(text)

    def _record_tool_call(self, update: ToolCallStart | ToolCallProgress) -> None:
        known = self._tool_calls.get(update.tool_call_id)
        record = ToolCallRecord(
            tool_call_id=update.tool_call_id,
            title=update.title or (known.title if known else ""),
            kind=update.kind if update.kind is not None else (known.kind if known else None),
            status=update.status if update.status is not None else (known.status if known else None),
            locations=(
                tuple(location.path for location in update.locations)
                if update.locations is not None
                else (known.locations if known else ())
            ),
        )
        self._tool_calls[update.tool_call_id] = record
        if self._on_tool_call is not None:
            self._on_tool_call(record)

    def _merge(self, tool_call: ToolCallUpdate) -> ToolCallUpdate:
        """The tool call as the request gives it, completed from the agent's earlier announcement.

        Agents often send only the id (and a title) in the permission request, having announced the
        kind and locations in a ``tool_call`` update before. Locations are united, not replaced: a
        path named in either place must pass the workspace check (fail closed).
        """
        known = self._tool_calls.get(tool_call.tool_call_id)
        if known is None:
            return tool_call
        paths = [location.path for location in tool_call.locations or ()]
        paths += [path for path in known.locations if path not in paths]
        return tool_call.model_copy(
            update={
                "kind": tool_call.kind if tool_call.kind is not None else known.kind,
                "title": tool_call.title or known.title,
                "locations": [ToolCallLocation(path=path) for path in paths],
            }
        )
