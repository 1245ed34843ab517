"""The Responses delegation backend of a loopback Live session.

With ``delegation: {"type": "responses", ...}``, a delegation by the voice starts a backend
response, streamed as ``response.event`` frames (:class:`~.backend_events.BackendStream`) with the
delegation's id. A :class:`~openab_voice.testing.realtime.responder.CallFunction` becomes a
``function_call`` output item; the response then waits (no ``response.completed``: the SDK calls it
"a delegated response waiting for tool results") until the client has sent a
``response.item.create`` with a ``function_call_output`` for every call and a ``response.create``.
The responder then answers again (``source="backend"``, the outputs in its lines): more calls, or
:class:`~openab_voice.testing.realtime.responder.Speak`, which is the backend's output text
(``message`` item, ``response.completed``) and is then said by the voice (how the real service
voices it is not documented). A ``response.create`` with no response waiting starts a new backend
response (no delegation id) over the items the client added.

Refused (an ``error`` event, codes assumed where the SDK is silent): a ``function_call_output`` for
a call no response waits on (``invalid_value``, ``item.call_id``), a ``response.create`` while a
backend response is still being decided (``conversation_already_has_active_response``) or with a
call's output missing (``tool_output_missing``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from openai.types.live import ResponseEvent, ResponseItemCreateEvent, SessionResource
from openai.types.responses.easy_input_message import EasyInputMessage
from openai.types.responses.response_input_item import FunctionCallOutput, Message

from openab_voice.clock import Clock
from openab_voice.testing.live.backend_events import BackendStream, NestedEvent
from openab_voice.testing.live.responder import (
    CallFunction,
    Conversation,
    Line,
    LiveReply,
    LiveResponder,
    Speak,
)
from openab_voice.testing.live.session_config import function_tools
from openab_voice.testing.live.speaking import SendEvent
from openab_voice.testing.live.wire import Refusal, new_id

__all__ = ["Backend", "BackendRun"]


@dataclass(slots=True, kw_only=True)
class BackendRun:
    """One backend response, for tests."""

    stream: BackendStream
    delegation_id: str | None
    state: Literal["thinking", "waiting", "completed"] = "thinking"
    calls: dict[str, CallFunction] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    replies: list[LiveReply] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.stream.id

    @property
    def missing(self) -> list[str]:
        """Calls still waiting for their output."""
        return [call_id for call_id in self.calls if call_id not in self.outputs]


class Backend:
    """Delegated Responses responses of one session.

    Args:
        send: the session's sender.
        conversation: the session's conversation (function calls and outputs are added to it).
        responder: decides each backend reply.
        resource: the session now.
        say: has the voice say the backend's output text.
        clock: for ``created_at``.
    """

    def __init__(
        self,
        *,
        send: SendEvent,
        conversation: Conversation,
        responder: LiveResponder,
        resource: Callable[[], SessionResource],
        say: Callable[[str], None],
        clock: Clock,
    ) -> None:
        self._send = send
        self._conversation = conversation
        self._responder = responder
        self._resource = resource
        self._say = say
        self._clock = clock
        self.runs: list[BackendRun] = []

    def open(self, delegation_id: str | None) -> BackendRun:
        """A new backend response (its id goes into the delegation's ``response_id``)."""
        resource = self._resource()
        config = resource.delegation
        assert config is not None and config.type == "responses"
        run = BackendRun(
            stream=BackendStream(
                model=config.responses.model,
                created_at=self._clock.wall(),
                parallel_tool_calls=bool(config.responses.parallel_tool_calls),
            ),
            delegation_id=delegation_id,
        )
        self.runs.append(run)
        return run

    async def start(self, run: BackendRun, first: LiveReply | None) -> None:
        """Stream ``run`` from ``response.created``; ``first`` is its reply (None: ask the responder)."""
        await self._emit(run, [run.stream.created()])
        await self._answer(run, first if first is not None else await self._ask(run))

    def item(self, event: ResponseItemCreateEvent) -> Refusal | None:
        """A ``response.item.create``: a call's output, or input for the next response."""
        item = event.item
        if isinstance(item, FunctionCallOutput):
            call_id = item.call_id or ""
            run = next((r for r in self.runs if r.state == "waiting" and call_id in r.calls), None)
            if run is None:
                message = f"No tool call found for function call output with call_id {call_id}."
                return Refusal(code="invalid_value", message=message, param="item.call_id")
            output = item.output if isinstance(item.output, str) else " ".join(_texts(item.output))
            run.outputs[call_id] = output
            self._conversation.lines.append(Line(role="tool_result", text=output, call_id=call_id))
        elif isinstance(item, EasyInputMessage | Message):
            content = item.content if isinstance(item.content, str) else " ".join(_texts(item.content))
            role: Literal["system", "user", "assistant"] = (
                "user" if item.role == "user" else "assistant" if item.role == "assistant" else "system"
            )
            self._conversation.lines.append(Line(role=role, text=content))
        return None

    def create(self) -> BackendRun | Refusal:
        """A ``response.create``: the waiting response goes on, or a new one starts (then :meth:`resume`)."""
        if any(run.state == "thinking" for run in self.runs):
            message = "A delegated response is in progress. Wait until it waits for tool results."
            return Refusal(code="conversation_already_has_active_response", message=message)
        run = next((r for r in self.runs if r.state == "waiting"), None)
        if run is None:
            return self.open(None)
        if run.missing:
            message = f"No tool output found for function call {run.missing[0]}."
            return Refusal(code="tool_output_missing", message=message, param="item")
        run.state = "thinking"
        return run

    async def resume(self, run: BackendRun) -> None:
        """Continue (or, when new, start) ``run`` after a ``response.create``."""
        if not run.replies:
            return await self.start(run, None)
        await self._answer(run, await self._ask(run))

    async def _ask(self, run: BackendRun) -> LiveReply:
        resource = self._resource()
        turn = self._conversation.turn(
            "backend",
            instructions=resource.instructions or "",
            tools=function_tools(resource),
            delegation_id=run.delegation_id,
        )
        return await self._responder.respond(turn)

    async def _answer(self, run: BackendRun, reply: LiveReply) -> None:
        run.replies.append(reply)
        if isinstance(reply, CallFunction):
            run.calls[reply.call_id] = reply
            line = Line(role="tool_call", text=reply.arguments, name=reply.name, call_id=reply.call_id)
            self._conversation.lines.append(line)
            run.state = "waiting"
            return await self._emit(run, run.stream.function_call(reply))
        # A Delegate from the backend has nothing to say: the response completes empty.
        text = reply.text if isinstance(reply, Speak) else ""
        run.state = "completed"
        events = run.stream.message(text) if text else []
        await self._emit(run, [*events, run.stream.completed()])
        if text:
            self._say(text)

    async def _emit(self, run: BackendRun, events: list[NestedEvent]) -> None:
        for nested in events:
            await self._send(
                ResponseEvent(
                    type="response.event",
                    event_id=new_id("event"),
                    event=nested,
                    delegation_id=run.delegation_id,
                )
            )


def _texts(parts: object) -> list[str]:
    """The text of content parts (images and files have none)."""
    if not isinstance(parts, list):
        return []
    return [text for part in parts if isinstance(text := getattr(part, "text", None), str)]
