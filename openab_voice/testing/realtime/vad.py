"""Server turn detection, for sessions that leave it on: an energy VAD over the appended audio.

The GA API's default is ``server_vad``: the server finds speech in the input buffer, says so
(``input_audio_buffer.speech_started`` / ``speech_stopped``), commits the buffer by itself and,
with ``create_response``, answers without being asked; with ``interrupt_response`` new speech
cancels the response in progress. The loopback does the same with a plain energy detector on 20 ms
frames (the API's ``threshold`` 0..1 maps to -50..-10 dBFS; ``semantic_vad`` is treated as
``server_vad`` with 500 ms of silence), so a client that forgets ``turn_detection: null`` is
answered behind its back here as it would be by the real service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from openai.types.realtime.realtime_audio_input_turn_detection import (
    RealtimeAudioInputTurnDetection,
    ServerVad,
)

from openab_voice.testing.realtime.session_config import PCM_RATE

__all__ = ["EnergyVad", "SpeechStarted", "SpeechStopped", "VadEvent"]

_FRAME = PCM_RATE // 50  # 20 ms


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechStarted:
    audio_start_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechStopped:
    audio_end_ms: int


VadEvent = SpeechStarted | SpeechStopped


class EnergyVad:
    """Finds speech in a session's input audio. Positions are ms since the session's first audio."""

    def __init__(self) -> None:
        self._pending = np.zeros(0, dtype=np.int16)
        self._position_ms = 0  # audio consumed so far
        self._speaking = False
        self._quiet_ms = 0

    def feed(self, pcm: bytes, detection: RealtimeAudioInputTurnDetection) -> list[VadEvent]:
        """Consume appended audio; return the speech boundaries it crossed."""
        threshold, prefix_ms, silence_ms = _settings(detection)
        samples = np.concatenate([self._pending, np.frombuffer(pcm, dtype="<i2")])
        usable = len(samples) - len(samples) % _FRAME
        self._pending = samples[usable:]
        events: list[VadEvent] = []
        for start in range(0, usable, _FRAME):
            frame = samples[start : start + _FRAME].astype(np.float64)
            rms = math.sqrt(float(np.mean(frame * frame))) / 32768.0
            loud = rms > 0 and 20 * math.log10(rms) > threshold
            self._position_ms += 20
            if loud and not self._speaking:
                self._speaking = True
                events.append(SpeechStarted(audio_start_ms=max(0, self._position_ms - 20 - prefix_ms)))
            if self._speaking:
                self._quiet_ms = 0 if loud else self._quiet_ms + 20
                if self._quiet_ms >= silence_ms:
                    self._speaking = False
                    self._quiet_ms = 0
                    events.append(SpeechStopped(audio_end_ms=self._position_ms - silence_ms))
        return events

    def reset(self) -> None:
        """The buffer was cleared or committed by the client: any speech in progress is forgotten."""
        self._pending = np.zeros(0, dtype=np.int16)
        self._speaking = False
        self._quiet_ms = 0


def _settings(detection: RealtimeAudioInputTurnDetection) -> tuple[float, int, int]:
    """(threshold in dBFS, prefix padding ms, silence ms) with the API's defaults."""
    if isinstance(detection, ServerVad):
        threshold = detection.threshold if detection.threshold is not None else 0.5
        prefix = detection.prefix_padding_ms if detection.prefix_padding_ms is not None else 300
        silence = detection.silence_duration_ms if detection.silence_duration_ms is not None else 200
        return -50.0 + 40.0 * threshold, prefix, silence
    return -30.0, 300, 500
