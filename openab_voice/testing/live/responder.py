"""What the loopback Live "model" answers: a :class:`LiveResponder` decides each reply.

The session hands it a :class:`LiveTurn`: the conversation as text (startup ``input``, what the
server's STT heard of each user speech, what the voice said, function calls and their outputs),
the frontend instructions, the context appended since the previous turn (``session.instructions``
/ ``thinking`` / ``commentary.append``) and, with Responses delegation, the backend's function
tools. ``source`` says who asks: the voice at the end of a user speech, or the Responses backend
(a delegation, or a ``response.create``).

A reply is :class:`~openab_voice.testing.realtime.responder.Speak` (the voice says it; from the
backend, it is the backend's output text, then voiced), :class:`~openab_voice.testing.realtime.responder.CallFunction`
(the model delegates and the backend calls that function; the function need not be one the session
declares, so a client can be tested refusing it) or :class:`Delegate` (the model delegates to the
session's target without a call: the client answers with ``session.commentary.append``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from openai.types.live import FunctionTool
from openai.types.live.initial_item import InitialItem

from openab_voice.testing.realtime.responder import (
    CallFunction,
    Line,
    ScriptedReplies,
    Speak,
    Transcript,
    echo_reply,
)

__all__ = [
    "AppendKind",
    "Appended",
    "CallFunction",
    "Conversation",
    "Delegate",
    "Line",
    "LiveReply",
    "LiveResponder",
    "LiveTurn",
    "ScriptedLiveResponder",
    "Speak",
    "echo_responder",
]

AppendKind = Literal["instructions", "thinking", "commentary"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Delegate:
    """Delegate to the session's target without a function call.

    Attributes:
        acknowledgement: said after the delegation's ``acknowledgement_delay_ms``, unless thinking or
            commentary is appended first (None: nothing is said).
    """

    acknowledgement: str | None = None


LiveReply = Speak | CallFunction | Delegate


@dataclass(frozen=True, slots=True, kw_only=True)
class Appended:
    """One ``session.{instructions,thinking,commentary}.append`` the session accepted."""

    kind: AppendKind
    content: str
    delegation_id: str | None
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveTurn(Transcript):
    """Everything a responder may look at for one reply."""

    source: Literal["speech", "backend"]
    lines: tuple[Line, ...]
    instructions: str
    context: tuple[Appended, ...] = ()
    tools: tuple[FunctionTool, ...] = ()
    delegation_id: str | None = None


class LiveResponder(Protocol):
    """Decides a reply. May take time (a model running); a barge-in abandons the call."""

    async def respond(self, turn: LiveTurn) -> LiveReply: ...


class ScriptedLiveResponder(ScriptedReplies[LiveTurn, LiveReply]):
    """The Live loopback's scripted model: the realtime loopback's
    :class:`~openab_voice.testing.realtime.responder.ScriptedReplies` over a :class:`LiveTurn`, so
    a reply may also be a :class:`Delegate`."""


ScriptedLiveReply = LiveReply | str | Callable[[LiveTurn], LiveReply | str]
"""One scripted reply: a reply, text to speak, or a function of the turn returning either."""


def echo_responder() -> ScriptedLiveResponder:
    """The default: repeats what it heard ("You said: ...")."""
    return ScriptedLiveResponder([echo_reply])


@dataclass(slots=True, kw_only=True)
class Conversation:
    """What the loopback model knows of one session, as text, and the context not yet given to a turn."""

    lines: list[Line] = field(default_factory=list)
    pending: list[Appended] = field(default_factory=list)

    def seed(self, items: Sequence[InitialItem]) -> None:
        """The startup ``input`` history (developer text reads as a system line)."""
        for item in items:
            text = " ".join(part.text for part in item.content)
            self.lines.append(Line(role="system" if item.role == "developer" else item.role, text=text))

    def turn(
        self,
        source: Literal["speech", "backend"],
        *,
        instructions: str,
        tools: tuple[FunctionTool, ...],
        delegation_id: str | None = None,
    ) -> LiveTurn:
        """The turn for a reply now; the pending context goes with it and is pending no more."""
        context, self.pending = tuple(self.pending), []
        return LiveTurn(
            source=source,
            lines=tuple(self.lines),
            instructions=instructions,
            context=context,
            tools=tools,
            delegation_id=delegation_id,
        )
