"""The soak's bus events, folded into counters (cumulative) and per-interval figures."""

from __future__ import annotations

from openab_voice.audio.events import AudioBufferOverrun, AudioReferenceDrift, AudioReferenceRealigned
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.discord.wire.events import VoiceConnected, VoiceDisconnected
from openab_voice.engine.events import InterruptionDetected, SpeechDropped
from openab_voice.stt.events import TranscriptFinal


class Tally:
    """Bus events folded into counters (cumulative) and per-interval figures."""

    def __init__(self) -> None:
        self.finals_at: list[float] = []
        self.interruptions = 0
        self.speech_dropped = 0
        self.errors: dict[str, int] = {}
        self.ring_drops: dict[str, int] = {}
        self.voice: dict[str, int] = {"connected": 0, "disconnected": 0}
        self.other: dict[str, int] = {}  # gap / resume events of the voice session's life, by name
        self.gaps: list[Event] = []  # VoiceGap: a gap in the voice session, over
        self.drift: list[float] = []  # |skew_ms| of this interval's drift events
        self.realigned = 0

    def __call__(self, event: Event) -> None:
        match event:
            case TranscriptFinal():
                self.finals_at.append(event.at)
            case InterruptionDetected():
                self.interruptions += 1
            case SpeechDropped():
                self.speech_dropped += 1
            case ErrorRaised():
                code = str(getattr(event, "code", type(event).__name__))
                self.errors[code] = self.errors.get(code, 0) + 1
            case AudioBufferOverrun():
                self.ring_drops[event.ring] = self.ring_drops.get(event.ring, 0) + event.dropped
            case AudioReferenceDrift():
                self.drift.append(abs(event.skew_ms))
            case AudioReferenceRealigned():
                self.realigned += 1
            case VoiceConnected():
                self.voice["connected"] += 1
            case VoiceDisconnected():
                self.voice["disconnected"] += 1
            case _ if "Gap" in type(event).__name__ or "Resum" in type(event).__name__:
                name = type(event).__name__
                self.other[name] = self.other.get(name, 0) + 1
                if name == "VoiceGap":
                    self.gaps.append(event)
