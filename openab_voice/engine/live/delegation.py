"""GPT-Live delegations: a proposal, never an approval (docs/adr/0022-gpt-live-engine.md, decision 4).

The live voice model has no tools of its own. Its session is started with Responses delegation
offering exactly the semantic action tools (:data:`LIVE_TOOLS`, :func:`delegation_config`); the
server-run backend's function calls arrive as ``response.event`` frames wrapping the Responses
stream, and each ``response.output_item.done`` whose item is a ``function_call`` is run here through
the tool path (the :class:`~openab_voice.tools.router.ToolRouter`, so the
:class:`~openab_voice.actions.broker.ActionBroker` proposes, posts and pins, and only the operator's
click approves). The call's output is the tool's real result (the broker's status, or the refusal
and its reason), followed by ``response.create`` so the backend goes on.

Refused without running, with the reason in the output or a ``thinking`` note on the delegation:
a function outside :data:`LIVE_TOOLS`, and a delegation whose target is not ``responses`` (a
``client`` delegation carries no task text to act on). A call the server repeats (same ``call_id``)
is answered again with the first result and never run twice.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.events import ToolCallHandled
from openab_voice.engine.response import ToolPath
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ToolCall, ToolSpec
from openab_voice.tools.registry import ToolContext, ToolResult

if TYPE_CHECKING:
    from openai.types.live import ClientEventParam

__all__ = ["LIVE_TOOLS", "Delegations", "delegation_config"]

log = logging.getLogger(__name__)

LIVE_TOOLS = frozenset({"start_agent_task", "get_agent_task", "cancel_agent_task"})
"""The only functions a live session's delegated backend is offered: the semantic action set."""

ANSWERED_KEPT = 256
"""Delegated calls whose results are kept, to answer a repeat without running it again."""

_REFUSED_TARGET = (
    "This bot does not act on a delegation without a typed request: real work goes only through "
    "start_agent_task, which posts a proposal the operator must confirm. Nothing was run."
)

Send = Callable[["ClientEventParam"], Awaitable[None]]


def delegation_config(specs: Sequence[ToolSpec], *, model: str, instructions: str) -> dict[str, Any]:
    """``session.start``'s ``delegation``: Responses delegation offering the specs in :data:`LIVE_TOOLS`
    (one call at a time, so each output is answered before the next call)."""
    tools = [
        {"type": "function", "name": s.name, "description": s.description, "parameters": s.parameters}
        for s in specs
        if s.name in LIVE_TOOLS
    ]
    return {
        "type": "responses",
        "responses": {
            "model": model,
            "instructions": instructions,
            "tools": tools,
            "parallel_tool_calls": False,
        },
    }


class Delegations:
    """Answers one live session's delegations.

    Args:
        send: sends a client event on the session's link.
        tools: the tool path (its router budgets and audits every call).
        bus: ``ToolCallHandled`` goes here.
        clock: stamps events.
        session_id: the voice session.
        context: the trusted facts of the turn a call belongs to (session, turn, speaker), from our
            state, never from the model.
    """

    def __init__(
        self,
        *,
        send: Send,
        tools: ToolPath,
        bus: EventBus,
        clock: Clock,
        session_id: str | None,
        context: Callable[[], ToolContext],
    ) -> None:
        self._send = send
        self._tools = tools
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._context = context
        # call_id -> its result (a repeat is not run); a session lasts as long as the call, so only the
        # latest are kept (a provider repeats a call within its own response, never much later).
        self._answered: collections.OrderedDict[str, ToolResult] = collections.OrderedDict()
        self.refused_delegations = 0

    async def handle(self, event: Any) -> bool:
        """Take ``event`` if it is a delegation's (True); anything else is left to the caller."""
        if event.type == "session.delegation.created":
            await self._created(event)
            return True
        if event.type == "response.event":
            payload = event.event if isinstance(event.event, dict) else {}
            if payload.get("type") == "response.output_item.done":
                item = payload.get("item")
                if isinstance(item, dict) and item.get("type") == "function_call":
                    await self._function_call(item)
            return True
        return False

    async def _created(self, event: Any) -> None:
        delegation = event.delegation
        if delegation.target == "responses":
            return  # its function calls come as response.event frames
        self.refused_delegations += 1
        log.info("live delegation %s (target %s) refused", delegation.id, delegation.target)
        await self._send(
            {"type": "session.thinking.append", "content": _REFUSED_TARGET, "delegation_id": delegation.id}
        )

    async def _function_call(self, item: dict[str, Any]) -> None:
        call_id, name = str(item.get("call_id") or ""), str(item.get("name") or "")
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        context = self._context()
        result = self._answered.get(call_id)
        if result is None:
            result = await self._run(ToolCall(id=call_id, name=name, arguments=arguments), context)
            self._answered[call_id] = result
            while len(self._answered) > ANSWERED_KEPT:
                self._answered.popitem(last=False)
            self._publish(result, context)
        await self._send(
            {
                "type": "response.item.create",
                "item": {"type": "function_call_output", "call_id": call_id, "output": result.to_json()},
            }
        )
        await self._send({"type": "response.create"})

    async def _run(self, call: ToolCall, context: ToolContext) -> ToolResult:
        if not call.id:
            return _refused(call, ErrorCode.TOOL_ARGUMENTS_MALFORMED, "the call has no call_id")
        if call.name not in LIVE_TOOLS:
            return _refused(call, ErrorCode.TOOL_UNKNOWN, f"{call.name} is not offered to the live engine")
        return await self._tools.call(call, context)

    def _publish(self, result: ToolResult, context: ToolContext) -> None:
        summary: dict[str, Any] = (
            {"content": result.content}
            if result.ok
            else {"error": result.error_code, "reason": result.reason}
        )
        self._bus.publish(
            ToolCallHandled(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                turn_id=context.turn_id or "",
                name=result.name,
                ok=result.ok,
                result=summary,
            )
        )


def _refused(call: ToolCall, code: ErrorCode, reason: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, error_code=code, reason=reason)
