"""A loopback OpenAI Realtime (GA) server on 127.0.0.1, built from the ``openai`` package's own types.

Client events are parsed into ``openai.types.realtime`` models and server events are built from
them (``wire``), so the server cannot drift from the SDK. It hears committed audio with local STT
(:class:`WhisperListener`), lets a :class:`Responder` decide (:class:`ScriptedResponder`,
:class:`ChatModelResponder`), speaks with local TTS (:class:`PiperVoice`), streams the audio paced
on an injected clock (:class:`Pacing`), honours cancel, truncation at ``audio_end_ms`` and function
calls, emulates server VAD for clients that leave it on, and takes planned faults (:class:`Faults`:
401 at the handshake, drops, failed responses, latency, closes). Tests and benches read each
:class:`LoopbackSession`: parsed client events, refused messages, events sent (with times), the
conversation with truncation applied, each response's record::

    async with LoopbackRealtimeServer(api_key="sk-test", responder=ScriptedResponder(["Hello."])) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        async with client.realtime.connect(model="gpt-realtime-2.1") as connection:
            ...
        session = await server.session(0)
        session.conversation.truncations, session.client_events, session.rejected
"""

from openab_voice.testing.realtime.conversation import HeldItem, TimedWord, Truncation
from openab_voice.testing.realtime.faults import DropRule, Faults, ResponseFailure
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.responder import (
    CallFunction,
    ChatModelResponder,
    Line,
    Reply,
    Responder,
    ScriptedResponder,
    Speak,
    Turn,
)
from openab_voice.testing.realtime.response import ResponseRecord
from openab_voice.testing.realtime.server import KNOWN_MODELS, LoopbackRealtimeServer
from openab_voice.testing.realtime.session import DEFAULT_RATE_LIMITS, LoopbackSession
from openab_voice.testing.realtime.speech import (
    Listener,
    PiperVoice,
    ScriptedListener,
    ToneVoice,
    Voice,
    WhisperListener,
)

__all__ = [
    "DEFAULT_RATE_LIMITS",
    "KNOWN_MODELS",
    "CallFunction",
    "ChatModelResponder",
    "DropRule",
    "Faults",
    "HeldItem",
    "Line",
    "Listener",
    "LoopbackRealtimeServer",
    "LoopbackSession",
    "Pacing",
    "PiperVoice",
    "Reply",
    "Responder",
    "ResponseFailure",
    "ResponseRecord",
    "ScriptedListener",
    "ScriptedResponder",
    "Speak",
    "TimedWord",
    "ToneVoice",
    "Truncation",
    "Turn",
    "Voice",
    "WhisperListener",
]
