"""The VAD stage: windows processed capture for the detector and applies hysteresis.

Onset: ``vad_min_speech_ms`` of windows at or above the start threshold (the onset time is the first
of them). End: ``vad_min_silence_ms`` of windows below the end threshold (the end time is the first
silent window). Between the thresholds the current state holds, so a comma pause does not split a
sentence (measured floor: 352 ms with 0.5 / 0.35, see ``shared/notes/dependencies.md``).

A detector failing at run time is replaced by a fresh instance and its window scored as silence;
the caller turns the returned error into an ``audio_processing_error`` event.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from openab_voice.audio.resample import Samples
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.providers.vad import VoiceActivityDetector

# Samples that start this close to where the buffered ones end continue them (timestamps of the
# capture carry rounding and the jitter buffer's small re-anchoring); further away is a capture gap.
_CONTIGUOUS_S = 0.005


class VadEdge(enum.Enum):
    """A hysteresis transition."""

    START = "start"
    END = "end"


@dataclass(frozen=True, slots=True)
class VadTransition:
    """A change of speech state at ``audio_time`` (onset window start, or first silent window)."""

    edge: VadEdge
    audio_time: float
    probability: float


@dataclass(frozen=True, slots=True)
class VadWindow:
    """One scored window: its start time, score and the hysteresis state after it."""

    audio_time: float
    probability: float
    in_speech: bool


class VadStage:
    """Streams processed capture through a detector for one speaker.

    Args:
        factory: builds a fresh detector.
        settings: thresholds and minimum durations.
        rate: internal sample rate.
        on_error: told about each runtime failure, after the detector was replaced.
    """

    def __init__(
        self,
        factory: Callable[[], VoiceActivityDetector],
        settings: FrontEndSettings,
        rate: int,
        *,
        on_error: Callable[[Exception], None],
    ) -> None:
        self._factory = factory
        self._on_error = on_error
        self._vad = factory()
        self.provider = self._vad.capabilities.name
        self.window = self._vad.capabilities.frame_samples
        self.window_s = self.window / rate
        self._rate = rate
        self._start = settings.vad_start_threshold
        self._end = settings.vad_end_threshold
        self._min_speech = settings.vad_min_speech_ms / 1000.0
        self._min_silence = settings.vad_min_silence_ms / 1000.0
        self._pending: Samples = np.zeros(0, dtype=np.int16)
        self._pending_ts = 0.0
        self.in_speech = False
        self.probability = 0.0
        self._run_start: float | None = None
        self._run_len = 0.0
        self._run_peak = 0.0
        self.error_count = 0
        self.generation = 1

    def push(self, samples: Samples, start_time: float) -> tuple[list[VadWindow], list[VadTransition]]:
        """Add processed samples starting at ``start_time``; score every complete window.

        Samples left over from before a capture gap (less than a window) are dropped, not joined to
        what comes after it: joined, the first window after the gap would carry the leftovers' time,
        and an onset after a 1.5 s pause would be stamped 1.5 s early.
        """
        if self._pending.size and abs(start_time - self._pending_end()) > _CONTIGUOUS_S:
            self._pending = np.zeros(0, dtype=np.int16)
        if not self._pending.size:
            self._pending_ts = start_time
            pending = samples
        else:
            pending = np.concatenate((self._pending, samples))
        windows: list[VadWindow] = []
        transitions: list[VadTransition] = []
        offset = 0
        while pending.size - offset >= self.window:
            ts = self._pending_ts + offset / self._rate
            prob = self._score(pending[offset : offset + self.window])
            offset += self.window
            edge = self._step(prob, ts)
            if edge is not None:
                transitions.append(edge)
            windows.append(VadWindow(ts, prob, self.in_speech))
        self._pending = pending[offset:].copy()
        self._pending_ts += offset / self._rate
        return windows, transitions

    def _pending_end(self) -> float:
        return self._pending_ts + self._pending.size / self._rate

    def force_end(self) -> VadTransition | None:
        """End speech now (the stream stopped); None when not in speech."""
        if not self.in_speech:
            return None
        end_at = self._run_start if self._run_start is not None else self._pending_ts
        self._reset_state()
        return VadTransition(VadEdge.END, end_at, self.probability)

    def reset(self) -> None:
        """Forget buffered samples and recurrent state (after a capture discontinuity)."""
        self._pending = np.zeros(0, dtype=np.int16)
        self._vad.reset()

    def close(self) -> None:
        """Release the detector."""
        self._vad.close()

    def _score(self, window: Samples) -> float:
        try:
            prob = self._vad.speech_probability(window)
        except Exception as exc:  # recover with a fresh detector; this window counts as silence
            self.error_count += 1
            self._replace()
            self._on_error(exc)
            prob = 0.0
        self.probability = prob
        return prob

    def _replace(self) -> None:
        old = self._vad
        try:
            self._vad = self._factory()
        except Exception:  # keep the old detector, freshly reset, rather than none at all
            old.reset()
            return
        self.generation += 1
        with contextlib.suppress(Exception):  # the failed instance is discarded either way
            old.close()

    def _step(self, prob: float, ts: float) -> VadTransition | None:
        if not self.in_speech:
            if prob < self._start:
                self._run_start, self._run_len, self._run_peak = None, 0.0, 0.0
                return None
            if self._run_start is None:
                self._run_start = ts
            self._run_len += self.window_s
            self._run_peak = max(self._run_peak, prob)
            if self._run_len + 1e-9 < max(self._min_speech, self.window_s):
                return None
            onset = self._run_start
            self.in_speech = True
            self._run_start, self._run_len = None, 0.0
            return VadTransition(VadEdge.START, onset, self._run_peak)
        if prob >= self._end:
            self._run_start, self._run_len = None, 0.0
            return None
        if self._run_start is None:
            self._run_start = ts
        self._run_len += self.window_s
        if self._run_len + 1e-9 < self._min_silence:
            return None
        end_at = self._run_start
        self._reset_state()
        return VadTransition(VadEdge.END, end_at, prob)

    def _reset_state(self) -> None:
        self.in_speech = False
        self._run_start, self._run_len, self._run_peak = None, 0.0, 0.0
