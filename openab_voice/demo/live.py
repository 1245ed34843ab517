"""``demo --engine live``: the bundled scenario with the live engine (GPT-Live), offline.

The provider is the loopback GPT-Live server (:mod:`openab_voice.testing.live`) on 127.0.0.1, reached
through the real ``openai`` client (``client.live.connect``) as OpenAI would be: it decides the end of
each turn it is let hear with its own VAD, hears it with local Whisper, answers with the offline chat
model (SmolLM2 through llama.cpp) and speaks with local Piper. A tool call the chat model makes is
delegated to the server's Responses backend, which asks the bot to run it (ADR 0022). Nothing leaves
the machine.

``testing.live`` ships no chat-model responder; :class:`ChatLiveResponder` puts the realtime
loopback's :class:`~openab_voice.testing.realtime.ChatModelResponder` behind the Live turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from openai.types.live import FunctionTool
from openai.types.realtime import RealtimeFunctionTool

from openab_voice.config import Settings
from openab_voice.demo.realtime import DEMO_KEY, demo_chat, pointed_at
from openab_voice.providers.chat import ChatModel
from openab_voice.providers.live import DEFAULT_LIVE_MODEL
from openab_voice.testing.live import LiveReply, LiveTurn, LoopbackLiveServer, Pacing
from openab_voice.testing.realtime import ChatModelResponder
from openab_voice.testing.realtime.responder import Turn

__all__ = ["ChatLiveResponder", "loopback_live_provider"]


@asynccontextmanager
async def loopback_live_provider(
    settings: Settings, *, first_audio_latency_s: float = 0.0
) -> AsyncIterator[Settings]:
    """Run the loopback GPT-Live server for the demo; yields ``settings`` pointed at it."""
    async with demo_chat(settings) as chat:
        server = LoopbackLiveServer(
            api_key=DEMO_KEY,
            responder=ChatLiveResponder(chat),
            pacing=Pacing(first_audio_latency_s=first_audio_latency_s),
        )
        async with server:
            yield pointed_at(settings, server.base_url, openai_live_model=DEFAULT_LIVE_MODEL)


class ChatLiveResponder:
    """A project chat model as the loopback Live "model": its text is spoken, its tool call is
    delegated. The notes appended since the last reply (who is speaking, what was heard) are read as
    part of the instructions, which is what they are to the model."""

    def __init__(self, chat: ChatModel) -> None:
        self._chat = ChatModelResponder(chat)

    async def respond(self, turn: LiveTurn) -> LiveReply:
        notes = [appended.content for appended in turn.context]
        return await self._chat.respond(
            Turn(
                lines=turn.lines,
                items=(),
                instructions="\n\n".join([turn.instructions, *notes]),
                tools=tuple(map(_realtime_tool, turn.tools)),
            )
        )


def _realtime_tool(tool: FunctionTool) -> RealtimeFunctionTool:
    return RealtimeFunctionTool(
        type="function", name=tool.name, description=tool.description, parameters=tool.parameters
    )
