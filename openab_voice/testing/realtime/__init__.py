"""A loopback OpenAI Realtime (GA) server on 127.0.0.1, built from the ``openai`` package's own types.

Client events are parsed into, and server events built from, ``openai.types.realtime`` models
(``wire``), so the server cannot drift from the SDK. It hears with local STT (:class:`WhisperListener`),
answers through a :class:`Responder` (:class:`ScriptedResponder`, :class:`ChatModelResponder`), speaks
with local TTS (:class:`PiperVoice`) paced on an injected clock (:class:`Pacing`), honours cancel,
truncation and function calls, and takes planned :class:`Faults`. Tests read each
:class:`LoopbackSession` (client events, rejections, events sent, the conversation). Usage:
:mod:`~openab_voice.testing.realtime.server`; more: docs/adr/0013-duplex-voice-engine.md.
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
