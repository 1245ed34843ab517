"""What the loopback "model" answers: a :class:`Responder` decides each response.

The session hands it a :class:`Turn` (the conversation as text: user audio already transcribed by
the server's STT, assistant speech cut to what was heard, function calls and their outputs, the
session's instructions and tools) and it returns :class:`Speak` (text the server synthesizes and
streams) or :class:`CallFunction` (a ``function_call`` output item; the conversation resumes when the
client sends the ``function_call_output`` and asks for another response).

Two are shipped: :class:`ScriptedResponder` (exact replies for tests and benches) and
:class:`ChatModelResponder` (any project :class:`~openab_voice.providers.chat.ChatModel`, e.g.
the offline llama model).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from openai.types.realtime import RealtimeFunctionTool
from openai.types.realtime.conversation_item import ConversationItem

from openab_voice.providers.chat import (
    ChatMessage,
    ChatModel,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.testing.realtime.wire import new_id

__all__ = [
    "CallFunction",
    "ChatModelResponder",
    "Line",
    "Reply",
    "Responder",
    "HeardTurn",
    "ScriptedReplies",
    "ScriptedResponder",
    "Speak",
    "Transcript",
    "Turn",
    "echo_reply",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Speak:
    """Say ``text`` (synthesized, streamed as audio deltas with transcript deltas)."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFunction:
    """Ask the client to run a function: ``arguments`` is JSON text, as a model produces it."""

    name: str
    arguments: str = "{}"
    call_id: str = field(default_factory=lambda: new_id("call"))


Reply = Speak | CallFunction


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One conversation item as text.

    ``role`` is ``"tool_call"`` for a function call (``name``, ``call_id``, ``text`` = arguments)
    and ``"tool_result"`` for its output (``call_id``, ``text`` = output).
    """

    role: Literal["system", "user", "assistant", "tool_call", "tool_result"]
    text: str
    name: str | None = None
    call_id: str | None = None


class Transcript:
    """What a turn's conversation, as :class:`Line` s, says last (shared by the realtime and Live turns)."""

    __slots__ = ()
    lines: tuple[Line, ...]

    @property
    def last_user_text(self) -> str:
        """What the user said last ("" if nothing)."""
        return next((line.text for line in reversed(self.lines) if line.role == "user"), "")

    @property
    def last_tool_result(self) -> Line | None:
        """The last line, when it is a function call's output (the reply after a tool call)."""
        return self.lines[-1] if self.lines and self.lines[-1].role == "tool_result" else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn(Transcript):
    """Everything a responder may look at for one response.

    Attributes:
        lines: the conversation as text, in order.
        items: the same conversation as the SDK items the server holds.
        instructions: the session's (or the response's) instructions.
        tools: the function tools offered.
    """

    lines: tuple[Line, ...]
    items: tuple[ConversationItem, ...]
    instructions: str
    tools: tuple[RealtimeFunctionTool, ...] = ()


class Responder(Protocol):
    """Decides a response. May take time (a model running); cancelling the call abandons it."""

    async def respond(self, turn: Turn) -> Reply: ...


class HeardTurn(Protocol):
    """A turn that knows what the user said last (a realtime :class:`Turn`, a Live ``LiveTurn``)."""

    @property
    def last_user_text(self) -> str: ...


TurnT = TypeVar("TurnT", bound=HeardTurn)
ReplyT = TypeVar("ReplyT")


class ScriptedReplies(Generic[TurnT, ReplyT]):
    """Answers with the next scripted reply; the last one repeats. Every turn is recorded.

    Generic over the turn it is given and the replies it may give (a :class:`Speak` among them), so
    the realtime and the Live loopbacks script their models alike.

    Args:
        replies: a reply, text to speak, or a function of the turn returning either.
    """

    def __init__(self, replies: Sequence[ReplyT | str | Callable[[TurnT], ReplyT | str]]) -> None:
        if not replies:
            raise ValueError("at least one reply")
        self._replies = list(replies)
        self.turns: list[TurnT] = []

    async def respond(self, turn: TurnT) -> ReplyT:
        self.turns.append(turn)
        reply = self._replies[min(len(self.turns), len(self._replies)) - 1]
        value = reply(turn) if callable(reply) else reply
        # A str is text to speak; every reply type the loopbacks script includes Speak.
        return typing.cast(ReplyT, Speak(text=value)) if isinstance(value, str) else value


ScriptedReply = Reply | str | Callable[[Turn], Reply | str]


class ScriptedResponder(ScriptedReplies[Turn, Reply]):
    """The realtime loopback's scripted model (:class:`ScriptedReplies` over a :class:`Turn`)."""


def echo_reply(turn: HeardTurn) -> str:
    """Repeats what the user said last ("You said: ..."), the loopbacks' default model."""
    heard = turn.last_user_text
    return f"You said: {heard}" if heard else "I did not hear anything."


class ChatModelResponder:
    """A project chat model as the realtime "model": its text is spoken, its tool call is a function call."""

    def __init__(self, chat: ChatModel) -> None:
        self._chat = chat

    async def respond(self, turn: Turn) -> Reply:
        messages = [ChatMessage(role="system", content=turn.instructions), *map(_message, turn.lines)]
        tools = [
            ToolSpec(name=tool.name, description=tool.description or "", parameters=_parameters(tool))
            for tool in turn.tools
            if tool.name
        ]
        text: list[str] = []
        stream = self._chat.stream(messages, tools=tools)
        try:
            async for event in stream:
                if isinstance(event, ToolCallRequested):
                    return CallFunction(
                        name=event.call.name, arguments=event.call.arguments, call_id=event.call.id
                    )
                if isinstance(event, TextDelta):
                    text.append(event.text)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        return Speak(text="".join(text).strip())


def _message(line: Line) -> ChatMessage:
    if line.role == "tool_call":
        call = ToolCall(id=line.call_id or "", name=line.name or "", arguments=line.text)
        return ChatMessage(role="assistant", content="", tool_calls=(call,))
    if line.role == "tool_result":
        return ChatMessage(role="tool", content=line.text, tool_call_id=line.call_id)
    return ChatMessage(role=line.role, content=line.text)


def _parameters(tool: RealtimeFunctionTool) -> dict[str, object]:
    params = tool.parameters
    return dict(params) if isinstance(params, dict) else {"type": "object", "properties": {}}
