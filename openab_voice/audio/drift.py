"""Capture / render-reference alignment tracking.

The APM can only cancel echo it has seen the reference for, so the render chunk fed with each capture
chunk must come from the same moment. :class:`DriftMonitor` watches the skew the
:class:`~openab_voice.audio.render.RenderAligner` measures while both streams are continuous. Beyond
the tolerance it emits ``audio_reference_drift`` and lowers the confidence the echo gate attaches to
its decisions; after ``recovery`` of aligned audio it emits ``audio_reference_realigned``.
"""

from __future__ import annotations

from collections.abc import Callable

from openab_voice.audio.events import AudioReferenceDrift, AudioReferenceRealigned
from openab_voice.bus.events import Event
from openab_voice.clock import Clock


class DriftMonitor:
    """Drift state for one speaker's capture against the shared render reference.

    Args:
        speaker_id: whose capture.
        tolerance_s: largest acceptable |skew|.
        recovery_s: aligned audio needed to leave the drifting state.
        low_confidence: gate confidence multiplier while drifting.
        clock: injected clock (event time).
        emit: event sink.
    """

    def __init__(
        self,
        speaker_id: str,
        *,
        tolerance_s: float,
        recovery_s: float,
        low_confidence: float,
        clock: Clock,
        emit: Callable[[Event], None],
    ) -> None:
        self.speaker_id = speaker_id
        self.tolerance_s = tolerance_s
        self.recovery_s = recovery_s
        self.low_confidence = low_confidence
        self._clock = clock
        self._emit = emit
        self._drifting_since: float | None = None
        self._aligned_since: float | None = None
        self.drift_events = 0
        self.last_skew_s: float | None = None

    @property
    def aligned(self) -> bool:
        """False from a drift until alignment has held for ``recovery_s``."""
        return self._drifting_since is None

    @property
    def confidence(self) -> float:
        """1.0 when aligned, ``low_confidence`` while drifting."""
        return 1.0 if self.aligned else self.low_confidence

    def observe(self, skew_s: float, audio_time: float) -> None:
        """Record the skew measured for the capture chunk at ``audio_time`` (both streams running)."""
        self.last_skew_s = skew_s
        if abs(skew_s) > self.tolerance_s:
            self._aligned_since = None
            if self._drifting_since is None:
                self._drifting_since = audio_time
                self.drift_events += 1
                self._emit(
                    AudioReferenceDrift(
                        at=self._clock.monotonic(),
                        speaker_id=self.speaker_id,
                        skew_ms=round(skew_s * 1000.0, 1),
                        tolerance_ms=round(self.tolerance_s * 1000.0, 1),
                    )
                )
            return
        if self._drifting_since is None:
            return
        if self._aligned_since is None:
            self._aligned_since = audio_time
        elif audio_time - self._aligned_since >= self.recovery_s:
            drifted_for = audio_time - self._drifting_since
            self._drifting_since = None
            self._aligned_since = None
            self._emit(
                AudioReferenceRealigned(
                    at=self._clock.monotonic(),
                    speaker_id=self.speaker_id,
                    drifted_for_ms=round(drifted_for * 1000.0, 1),
                )
            )
