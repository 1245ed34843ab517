"""Events of the audio front end (subscribe to them on the :class:`~openab_voice.bus.EventBus`).

``at`` is the injected clock's monotonic time at emission; ``audio_time`` is the timestamp of the
audio concerned (the same monotonic base: receiver and playback stamp frames with the same clock).
``event_type`` is the stable snake_case name used in reports and the spec. No event carries samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from openab_voice.bus.events import Event


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioBufferOverrun(Event):
    """A bounded ring was full: its oldest unread frames were dropped.

    Emitted at most once per second per ring; ``dropped`` counts drops since the previous event.
    """

    event_type: ClassVar[str] = "audio_buffer_overrun"
    ring: str
    speaker_id: str | None
    capacity: int
    dropped: int
    dropped_total: int
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioReferenceDrift(Event):
    """Capture and render timestamps diverged beyond tolerance; gate confidence is lowered.

    ``skew_ms`` > 0: the render reference lags the capture (stale); < 0: it runs ahead.
    """

    event_type: ClassVar[str] = "audio_reference_drift"
    speaker_id: str
    skew_ms: float
    tolerance_ms: float
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioReferenceRealigned(Event):
    """Capture and render stayed within tolerance long enough: full gate confidence is back."""

    event_type: ClassVar[str] = "audio_reference_realigned"
    speaker_id: str
    drifted_for_ms: float
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioProcessingError(Event):
    """A provider failed at run time; the pipeline replaced it with a fresh instance.

    ``recovered`` is False when the fresh instance could not be created either: the pipeline then
    outputs silence (never unprocessed audio) and retries.
    """

    event_type: ClassVar[str] = "audio_processing_error"
    speaker_id: str
    component: str
    provider: str
    code: str
    message: str
    recovered: bool
    generation: int
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioPipelineStarted(Event):
    """A speaker's pipeline was created on its first frame."""

    event_type: ClassVar[str] = "audio_pipeline_started"
    speaker_id: str
    apm_provider: str
    vad_provider: str
    degraded: bool
    degraded_reasons: tuple[str, ...] = ()
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioPipelineStopped(Event):
    """A speaker's pipeline was freed (``remove_speaker`` or front end closed)."""

    event_type: ClassVar[str] = "audio_pipeline_stopped"
    speaker_id: str
    reason: str
    frames: int
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechStarted(Event):
    """User speech began (VAD onset accepted by the echo gate).

    Attributes:
        audio_time: timestamp of the first speech window.
        probability: VAD score at the onset.
        during_playback: the bot was speaking: an interruption candidate for the engine.
        confidence: gate confidence (lower while the reference drifts or the APM re-converges).
    """

    event_type: ClassVar[str] = "speech_start"
    speaker_id: str
    audio_time: float
    probability: float
    during_playback: bool
    confidence: float
    stage: str = "vad"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechEnded(Event):
    """User speech ended after the configured minimum silence (or the stream stopped)."""

    event_type: ClassVar[str] = "speech_end"
    speaker_id: str
    audio_time: float
    started_audio_time: float
    duration_s: float
    reason: str = "silence"
    stage: str = "vad"


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturePaused(Event):
    """No packet from a speaker for ``capture_gap_ms`` while their speech is open (Discord sends
    nothing in silence): they may have stopped. A hint for speculation only; the speech ends, or
    goes on, as the front end decides later.

    Attributes:
        audio_time: capture time after the last frame received.
    """

    event_type: ClassVar[str] = "capture_paused"
    speaker_id: str
    audio_time: float
    stage: str = "vad"


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoCouplingDetected(Event):
    """A speaker's raw capture was seen to carry the bot's playback: its APM now gets the reference.
    Published again when a coupled speaker's echo path got shorter and its APM started afresh.

    Attributes:
        correlation: the last check's peak normalised correlation of raw capture with the render.
        raw_dbfs: raw capture level over that check's window.
    """

    event_type: ClassVar[str] = "echo_coupling_detected"
    speaker_id: str
    correlation: float | None
    raw_dbfs: float
    stage: str = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoGateDecision(Event):
    """The echo gate's verdict on a VAD onset, with its evidence.

    Attributes:
        accepted: True when the onset counts as user speech.
        reason: short machine-readable reason (``render_idle``, ``echo_suppressed``, ...).
        bot_speaking: render reference was active within the gate window.
        confidence: 0-1; lowered while the reference drifts or the APM re-converges.
        raw_dbfs: capture level before APM over the onset window.
        residual_dbfs: capture level after APM over the onset window.
        render_dbfs: render level over the gate window.
        suppression_db: ``raw_dbfs - residual_dbfs``: how much the APM removed.
        render_correlation: peak normalised cross-correlation with the render of the residual, or
            of the raw capture where the gate weighed it too (a speaker not coupled, an onset the
            AEC left uncancelled), whichever is higher.
        raw_correlation: the raw capture's own peak correlation with the render, where the gate
            weighed it (0.0 elsewhere); ``echo_uncancelled`` rests on it.
        echo_cancelling: the APM cancels echo (False for ``disabled``): the suppression tests counted.
        coupled: the APM gets this speaker's render reference (:mod:`~openab_voice.audio.coupling`).
        echo_suspected: the speaker's raw capture recently followed the render (not yet coupled).
        reference_aligned: capture and render timestamps within tolerance.
        apm_degraded: the APM does not cancel echo (``disabled``) or is re-converging.

    ``bot_speaking`` and ``raw_dbfs`` to ``echo_suspected`` are the gate's evidence
    (:class:`~openab_voice.audio.echo_gate.GateEvidence`), rounded: all that its decision weighed
    besides the confidence it was given.
    """

    event_type: ClassVar[str] = "echo_gate_decision"
    speaker_id: str
    audio_time: float
    accepted: bool
    reason: str
    bot_speaking: bool
    confidence: float
    raw_dbfs: float
    residual_dbfs: float
    render_dbfs: float
    suppression_db: float
    render_correlation: float
    raw_correlation: float = 0.0
    echo_cancelling: bool = True
    coupled: bool = True
    echo_suspected: bool = False
    reference_aligned: bool
    apm_degraded: bool
    stage: str = "echo_gate"
