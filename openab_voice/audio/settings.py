"""``FrontEndSettings``: every tunable of the audio front end in one frozen dataclass.

The composition root (``app/providers.py``) maps ``OPENAB_*`` settings onto it; tests and the
self-test build it directly. A knob that is a setting takes its default from the setting's declaration
(:mod:`~openab_voice.settings.defaults`), so both run on the same one. Defaults come from measurements in ``shared/notes/dependencies.md`` (Silero 0.5 / 0.35
hysteresis never split a Piper sentence at a comma pause with >= 352 ms of silence wait).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from openab_voice.errors import ConfigError
from openab_voice.providers.apm import ApmConfig
from openab_voice.providers.vad import VadConfig
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

ApmProviderName = Literal["webrtc", "webrtc-audio-processing", "disabled"]
VadProviderName = Literal["silero", "webrtcvad"]

APM_RATES = (8000, 16000, 32000, 48000)


@dataclass(frozen=True, slots=True, kw_only=True)
class FrontEndSettings:
    """Audio front end configuration.

    Attributes:
        internal_rate: mono sample rate everything after resampling runs at (APM, VAD, STT).
        apm_provider: ``"webrtc"`` (livekit AEC3, default), ``"webrtc-audio-processing"`` (optional
            extra) or ``"disabled"`` (development only; reported as degraded everywhere).
        vad_provider: ``"silero"`` (default) or ``"webrtcvad"``.
        echo_cancellation / noise_suppression / auto_gain_control / high_pass_filter: APM stages.
        apm_stream_delay_ms: fixed delay hint for AEC; None lets AEC3 estimate it (recommended:
            Discord's round trip varies per listener).
        vad_start_threshold: probability at or above which a window counts as speech.
        vad_end_threshold: probability below which a window counts as silence (hysteresis: between
            the two thresholds the current state holds).
        vad_min_speech_ms: speech needed before ``speech_start`` is declared.
        vad_min_silence_ms: silence needed before ``speech_end`` is declared.
        webrtcvad_mode: aggressiveness of the ``webrtcvad`` provider (0-3).
        capture_ring_frames: per-speaker capture ring capacity in receiver frames (20 ms each).
        workers: processing threads (shards of speakers); 0: one per CPU, at most 2.
        render_ring_frames: render reference ring capacity (shared input side) in frames.
        processed_queue_frames: per-subscriber processed-capture queue capacity.
        render_history_ms: how much render reference each speaker keeps for alignment and the gate.
        drift_tolerance_ms: capture/render timestamp skew beyond which the reference is "drifting".
        drift_recovery_ms: aligned time needed before a drift counts as recovered.
        drift_confidence: multiplier on gate confidence while drifting or while the APM re-converges.
        capture_gap_ms: a capture pause longer than this is a discontinuity (Discord stops sending
            packets in silence), not drift.
        aec_reference: ``auto`` feeds a speaker's APM the bot's playback only once that speaker's raw
            capture has been seen to carry it (:mod:`~openab_voice.audio.coupling`); ``always`` from
            the start.
        gate_render_window_ms: render energy within this window means "the bot is speaking".
        gate_render_active_dbfs: render level above which the bot counts as speaking.
        gate_min_residual_dbfs: processed capture quieter than this cannot be user speech.
        gate_max_suppression_db: if the APM removed more than this from the capture over the onset
            window, the onset is explained by echo.
        gate_quiet_residual_db / gate_quiet_max_correlation: a residual more than the first under the
            render level counts as echo above the second correlation (instead of ``gate_max_correlation``).
        gate_dominated_suppression_db / gate_residual_below_render_db: an onset the APM suppressed by
            more than the first and whose residual is more than the second under the render level is
            residual echo.
        gate_max_correlation: peak normalised cross-correlation of the processed capture with the
            recent render above this means echo.
        gate_onset_window_ms: capture history the gate weighs at an onset.
        gate_drift_margin_db: how much stricter the suppression test gets while confidence is low.
        apm_reconverge_ms: after a fresh APM instance, confidence stays low for this long.
    """

    internal_rate: int = default_of(VoiceSettings, "audio_rate")
    apm_provider: ApmProviderName = default_of(VoiceSettings, "apm_provider")
    vad_provider: VadProviderName = default_of(VoiceSettings, "vad_provider")
    echo_cancellation: bool = default_of(VoiceSettings, "echo_cancellation")
    noise_suppression: bool = default_of(VoiceSettings, "noise_suppression")
    auto_gain_control: bool = default_of(VoiceSettings, "auto_gain_control")
    high_pass_filter: bool = True
    apm_stream_delay_ms: int | None = None
    aec_reference: Literal["auto", "always"] = "auto"
    vad_start_threshold: float = 0.5
    vad_end_threshold: float = 0.35
    vad_min_speech_ms: int = 32
    vad_min_silence_ms: int = default_of(VoiceSettings, "vad_min_silence_ms")
    webrtcvad_mode: int = 3
    capture_ring_frames: int = 50
    render_ring_frames: int = 100
    workers: int = default_of(VoiceSettings, "audio_workers")
    processed_queue_frames: int = 500
    render_history_ms: int = 1_000
    drift_tolerance_ms: float = default_of(VoiceSettings, "audio_drift_tolerance_ms")
    drift_recovery_ms: float = 500.0
    drift_confidence: float = 0.5
    capture_gap_ms: float = 60.0
    gate_render_window_ms: int = 500
    gate_render_active_dbfs: float = -50.0
    gate_min_residual_dbfs: float = -50.0
    gate_max_suppression_db: float = 12.0
    gate_max_correlation: float = 0.7
    gate_quiet_residual_db: float = 6.0
    gate_quiet_max_correlation: float = 0.45
    gate_dominated_suppression_db: float = 6.0
    gate_residual_below_render_db: float = 10.0
    gate_onset_window_ms: int = 200
    gate_drift_margin_db: float = 6.0
    apm_reconverge_ms: float = 2_000.0

    def __post_init__(self) -> None:
        def bad(setting: str, why: str) -> ConfigError:
            return ConfigError(f"{setting}: {why}", setting=setting)

        if self.internal_rate not in APM_RATES:
            raise bad("internal_rate", f"must be one of {APM_RATES} (what WebRTC APM accepts)")
        if self.vad_provider == "silero" and self.internal_rate != 16_000:
            raise bad("internal_rate", "the silero VAD runs at 16000 Hz")
        if not 0.0 < self.vad_end_threshold <= self.vad_start_threshold < 1.0:
            raise bad("vad_start_threshold", "need 0 < end threshold <= start threshold < 1")
        if not 0 <= self.webrtcvad_mode <= 3:
            raise bad("webrtcvad_mode", "must be 0-3")
        if self.workers < 0:
            raise bad("workers", "must be 0 (automatic) or more")
        for name in ("capture_ring_frames", "render_ring_frames", "processed_queue_frames"):
            if getattr(self, name) < 1:
                raise bad(name, "must be at least 1")
        if self.vad_min_speech_ms < 0 or self.vad_min_silence_ms < 0:
            raise bad("vad_min_silence_ms", "must not be negative")
        if self.drift_tolerance_ms <= 0 or self.capture_gap_ms <= 0:
            raise bad("drift_tolerance_ms", "must be positive")
        if not 0.0 < self.drift_confidence <= 1.0:
            raise bad("drift_confidence", "must be in (0, 1]")
        if self.render_history_ms < self.gate_render_window_ms:
            raise bad("render_history_ms", "must cover gate_render_window_ms")

    @property
    def degraded(self) -> bool:
        """True when the configuration cannot clean audio (the ``disabled`` APM)."""
        return self.apm_provider == "disabled"

    def apm_config(self) -> ApmConfig:
        """The provider-facing APM configuration."""
        return ApmConfig(
            sample_rate=self.internal_rate,
            echo_cancellation=self.echo_cancellation,
            noise_suppression=self.noise_suppression,
            auto_gain_control=self.auto_gain_control,
            high_pass_filter=self.high_pass_filter,
            stream_delay_ms=self.apm_stream_delay_ms,
        )

    def vad_config(self) -> VadConfig:
        """The provider-facing VAD configuration."""
        return VadConfig(sample_rate=self.internal_rate, webrtcvad_mode=self.webrtcvad_mode)
