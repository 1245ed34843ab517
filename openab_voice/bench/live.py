"""The live engine's side of ``bench dialogue --engine live``: the loopback GPT-Live server as the
provider, hearing with the bench's faster-whisper and speaking with its Piper voice (the same scripted
model as the realtime engine's), and the providers that point the bot's conversation at it."""

from __future__ import annotations

from dataclasses import replace

from openab_voice.bench.realtime import KEY, scripted_answer
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.live import live_capabilities
from openab_voice.engine.settings import DialogueSettings
from openab_voice.providers.live import LiveConfig
from openab_voice.providers.live_openai import OpenAILive
from openab_voice.providers.tts import TextToSpeech
from openab_voice.stt.base import SpeechToText
from openab_voice.testing.live import (
    LiveTurn,
    LoopbackLiveServer,
    Pacing,
    PiperVoice,
    ScriptedLiveResponder,
    WhisperListener,
)

__all__ = ["LoopbackLiveServer", "live_providers", "live_server"]


def _reply(turn: LiveTurn) -> str:
    return scripted_answer(turn.last_user_text)


async def live_server(
    stt: SpeechToText, tts: TextToSpeech, *, first_audio_latency_s: float
) -> LoopbackLiveServer:
    """A started loopback GPT-Live server that hears with ``stt``, speaks with ``tts`` as audio plays."""
    server = LoopbackLiveServer(
        api_key=KEY,
        responder=ScriptedLiveResponder([_reply]),
        listener=WhisperListener(stt),
        voice=PiperVoice(tts),
        pacing=Pacing(first_audio_latency_s=first_audio_latency_s),
    )
    return await server.start()


def live_providers(
    stt: SpeechToText, dialogue: DialogueSettings, server: LoopbackLiveServer
) -> ConversationProviders:
    """The bot's providers for the live engine on ``server`` (our STT still decides the turns)."""
    dialogue = replace(dialogue, preemptive_generation=False)
    return ConversationProviders(
        stt=stt,
        dialogue=dialogue,
        capabilities=live_capabilities(dialogue.mode),
        live=OpenAILive(LiveConfig(base_url=server.base_url, api_key=KEY)),
    )
