"""The realtime engine's side of ``bench dialogue --engine realtime``: the loopback realtime server
as the provider, hearing with the bench's faster-whisper and speaking with its Piper voice, and the
providers that point the bot's conversation at it."""

from __future__ import annotations

from dataclasses import replace

from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.realtime import realtime_capabilities
from openab_voice.engine.settings import DialogueSettings
from openab_voice.providers.realtime import RealtimeConfig
from openab_voice.providers.realtime_openai import OpenAIRealtime
from openab_voice.providers.tts import TextToSpeech
from openab_voice.stt.base import SpeechToText
from openab_voice.testing.realtime import (
    LoopbackRealtimeServer,
    Pacing,
    PiperVoice,
    ScriptedResponder,
    Turn,
    WhisperListener,
)

__all__ = ["KEY", "LoopbackRealtimeServer", "realtime_providers", "realtime_server", "scripted_answer"]

KEY = "sk-bench"

_ANSWER = (
    "The capital of France is Paris. It lies on the river Seine. About two million people live "
    "there. It is famous for the Eiffel Tower."
)


def scripted_answer(heard: str) -> str:
    """The bench's scripted model: the long answer to the question, "Okay." to anything else."""
    heard = heard.lower()
    return _ANSWER if "capital" in heard or "france" in heard else "Okay."


def _reply(turn: Turn) -> str:
    return scripted_answer(turn.last_user_text)


async def realtime_server(
    stt: SpeechToText, tts: TextToSpeech, *, first_audio_latency_s: float
) -> LoopbackRealtimeServer:
    """A started loopback server that hears with ``stt``, speaks with ``tts`` as audio plays."""
    server = LoopbackRealtimeServer(
        api_key=KEY,
        responder=ScriptedResponder([_reply]),
        listener=WhisperListener(stt),
        voice=PiperVoice(tts),
        pacing=Pacing(first_audio_latency_s=first_audio_latency_s),
    )
    return await server.start()


def realtime_providers(
    stt: SpeechToText, dialogue: DialogueSettings, server: LoopbackRealtimeServer
) -> ConversationProviders:
    """The bot's providers for the realtime engine on ``server`` (our STT still decides the turns)."""
    dialogue = replace(dialogue, preemptive_generation=False)
    connector = OpenAIRealtime(RealtimeConfig(base_url=server.base_url, api_key=KEY))
    return ConversationProviders(
        stt=stt,
        dialogue=dialogue,
        capabilities=realtime_capabilities(dialogue.mode),
        realtime=connector,
    )
