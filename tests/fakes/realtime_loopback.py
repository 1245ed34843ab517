"""The loopback realtime server as the ``openai`` SDK tests meet it: servers made per test (closed
after it) and the server events read up to a kind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import openai
from openai.resources.realtime.realtime import AsyncRealtimeConnection

from openab_voice.testing.realtime import (
    LoopbackRealtimeServer,
    Pacing,
    ScriptedListener,
    ScriptedResponder,
    ToneVoice,
)

KEY = "sk-loopback-test"
MODEL = "gpt-realtime"

Factory = Callable[..., LoopbackRealtimeServer]


@asynccontextmanager
async def loopback_servers(
    listener: Callable[[], ScriptedListener], voice: Callable[[], ToneVoice]
) -> AsyncIterator[Factory]:
    """``make(replies, **kwargs)``: a server answering ``replies``, unpaced unless ``pacing`` is given,
    hearing through ``listener()`` and speaking through ``voice()``; every one is closed on exit."""
    servers: list[LoopbackRealtimeServer] = []

    def make(replies: list[Any], **kwargs: Any) -> LoopbackRealtimeServer:
        kwargs.setdefault("pacing", Pacing(realtime_factor=0))
        server = LoopbackRealtimeServer(
            api_key=KEY, responder=ScriptedResponder(replies), listener=listener(), voice=voice(), **kwargs
        )
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            await server.aclose()


def client(server: LoopbackRealtimeServer, key: str = KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=key)


async def until(connection: AsyncRealtimeConnection, kind: str) -> list[Any]:
    """Every server event up to and including the first of type ``kind``."""
    events: list[Any] = []
    async for event in connection:
        events.append(event)
        if event.type == kind:
            return events
    raise AssertionError(f"connection closed before {kind}")
