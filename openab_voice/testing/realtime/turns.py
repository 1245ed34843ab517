"""From the held conversation to the text a responder reads (:class:`~.responder.Turn`).

User audio is transcribed here, once per item, by the server's :class:`~.speech.Listener`; assistant
speech reads as its transcript after truncation, so a responder sees only what the user heard.
"""

from __future__ import annotations

from openai.types.realtime import (
    RealtimeConversationItemAssistantMessage,
    RealtimeConversationItemFunctionCall,
    RealtimeConversationItemFunctionCallOutput,
    RealtimeConversationItemSystemMessage,
    RealtimeConversationItemUserMessage,
    RealtimeFunctionTool,
)

from openab_voice.testing.realtime.conversation import Conversation, HeldItem
from openab_voice.testing.realtime.responder import Line, Turn
from openab_voice.testing.realtime.speech import Listener

__all__ = ["build_turn"]


async def build_turn(
    conversation: Conversation,
    listener: Listener,
    *,
    instructions: str,
    tools: tuple[RealtimeFunctionTool, ...],
) -> Turn:
    """The turn for a response over ``conversation`` (transcribing user audio not heard yet)."""
    lines: list[Line] = []
    for held in conversation.held:
        line = await _line(held, listener)
        if line is not None:
            lines.append(line)
    return Turn(lines=tuple(lines), items=tuple(conversation.items), instructions=instructions, tools=tools)


async def _line(held: HeldItem, listener: Listener) -> Line | None:
    item = held.item
    if isinstance(item, RealtimeConversationItemUserMessage):
        texts = [part.text or "" for part in item.content if part.type == "input_text"]
        if any(part.type == "input_audio" for part in item.content):
            if held.transcript is None:
                held.transcript = await listener.transcribe(held.audio)
            texts.append(held.transcript)
        return Line(role="user", text=" ".join(t for t in texts if t))
    if isinstance(item, RealtimeConversationItemAssistantMessage):
        texts = [part.transcript or part.text or "" for part in item.content]
        return Line(role="assistant", text=" ".join(t for t in texts if t))
    if isinstance(item, RealtimeConversationItemSystemMessage):
        return Line(role="system", text=" ".join(part.text or "" for part in item.content))
    if isinstance(item, RealtimeConversationItemFunctionCall):
        return Line(role="tool_call", text=item.arguments, name=item.name, call_id=item.call_id)
    if isinstance(item, RealtimeConversationItemFunctionCallOutput):
        return Line(role="tool_result", text=item.output, call_id=item.call_id)
    return None  # MCP items: not the loopback's business
