"""``demo --engine realtime``: the bundled scenario with the realtime engine, offline.

The provider is the loopback realtime server (:mod:`openab_voice.testing.realtime`) on 127.0.0.1,
reached by the bot through the real ``openai`` client exactly as it would reach OpenAI: it hears the
committed turn audio with local Whisper, answers with the offline chat model (SmolLM2 through
llama.cpp) and speaks with local Piper, streaming audio as it plays. Nothing leaves the machine.
:mod:`openab_voice.demo.live` does the same for ``demo --engine live`` with the helpers here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import SecretStr

from openab_voice.config import Settings
from openab_voice.engine.settings import SMALL_MODEL_PROMPT
from openab_voice.providers.chat import ChatConfig, ChatModel, chat_registry
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL
from openab_voice.testing.realtime import ChatModelResponder, LoopbackRealtimeServer, Pacing

__all__ = ["DEMO_KEY", "demo_chat", "loopback_provider", "pointed_at"]

DEMO_KEY = "sk-loopback-demo"


@asynccontextmanager
async def loopback_provider(
    settings: Settings, *, first_audio_latency_s: float = 0.0
) -> AsyncIterator[Settings]:
    """Run the loopback realtime server for the demo; yields ``settings`` pointed at it."""
    async with demo_chat(settings) as chat:
        server = LoopbackRealtimeServer(
            api_key=DEMO_KEY,
            responder=ChatModelResponder(chat),
            pacing=Pacing(first_audio_latency_s=first_audio_latency_s),
        )
        async with server:
            yield pointed_at(settings, server.base_url, openai_realtime_model=DEFAULT_REALTIME_MODEL)


@asynccontextmanager
async def demo_chat(settings: Settings) -> AsyncIterator[ChatModel]:
    """The chat model a loopback server answers with: the one the settings configure (the offline
    SmolLM2 by default), closed on exit."""
    chat = chat_registry().create(
        settings.chat_provider,
        ChatConfig(
            temperature=0.3,
            model=settings.chat_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
            max_tokens=settings.chat_max_tokens,
        ),
    )
    try:
        yield chat
    finally:
        await chat.aclose()


def pointed_at(settings: Settings, base_url: str, **update: object) -> Settings:
    """``settings`` speaking to the loopback server at ``base_url`` with the demo key, plus ``update``
    (the model the server knows)."""
    changes: dict[str, object] = {
        "openai_base_url": base_url,
        "openai_api_key": SecretStr(DEMO_KEY),
        **update,
    }
    if settings.system_prompt is None and settings.chat_provider == "llama":
        changes["system_prompt"] = SMALL_MODEL_PROMPT  # what the small model follows best
    return settings.model_copy(update=changes)
