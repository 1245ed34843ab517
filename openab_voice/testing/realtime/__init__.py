"""A loopback OpenAI Realtime (GA) server on 127.0.0.1, built from the ``openai`` package's own types.

Client events are parsed into ``openai.types.realtime`` models and server events are built from
them (``wire``), so the server cannot drift from the SDK; it answers with local STT, a pluggable
:class:`Responder` and local TTS, streams audio paced on an injected clock, honours cancel,
truncation and function calls, and takes planned faults (:class:`Faults`: 401 at the handshake,
drops, failed responses, latency, closes). Tests and benches read every session's events and
conversation. Start with :class:`LoopbackRealtimeServer`.
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
