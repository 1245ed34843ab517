"""The audio processor seam (echo cancellation, noise suppression, gain control): its config, its
capabilities, the Protocol and the registry of the processors shipped with openab_voice.

It works on mono signed 16-bit PCM at one sample rate, the front end's internal format. Implementations
live one per module (``apm_livekit``, ``apm_webrtc_audio_processing``, ``apm_disabled``), imported only
when selected (:mod:`openab_voice.providers.registry`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ApmConfig:
    """What the front end asks of an audio processor.

    Attributes:
        sample_rate: Hz of both capture and render reference (they must match).
        channels: always 1 inside the front end; kept explicit so a mismatch is checkable.
        echo_cancellation: AEC (AEC3 for the WebRTC provider) against the render reference.
        noise_suppression: stationary noise suppression.
        auto_gain_control: digital gain control of the capture stream.
        high_pass_filter: removes DC and rumble before the other stages.
        stream_delay_ms: a fixed render-to-capture delay hint, or None to let AEC estimate it.
    """

    sample_rate: int
    channels: int = 1
    echo_cancellation: bool = True
    noise_suppression: bool = True
    auto_gain_control: bool = True
    high_pass_filter: bool = True
    stream_delay_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApmCapabilities:
    """What an audio processor instance actually does.

    Attributes:
        name: registry name of the provider.
        echo_cancellation / noise_suppression / auto_gain_control / high_pass_filter: stages that run.
        frame_ms: the exact frame duration the processor accepts (WebRTC: 10 ms).
        sample_rates: rates it accepts.
        degraded: True when the provider does not clean audio as configured (``disabled``); the
            front end reports this in every pipeline event and status.
    """

    name: str
    echo_cancellation: bool
    noise_suppression: bool
    auto_gain_control: bool
    high_pass_filter: bool
    frame_ms: int = 10
    sample_rates: tuple[int, ...] = (8000, 16000, 32000, 48000)
    degraded: bool = False


@runtime_checkable
class AudioProcessor(Protocol):
    """One echo canceller / noise suppressor / gain controller for one capture stream.

    Calls alternate: one :meth:`process_render` (what the bot played during this 10 ms) and one
    :meth:`process_capture` (what the microphone heard). Frames are mono int16 of exactly
    ``capabilities.frame_ms`` at ``ApmConfig.sample_rate``.
    """

    @property
    def capabilities(self) -> ApmCapabilities:
        """What this instance does."""
        ...

    def process_render(self, pcm: bytes) -> None:
        """Feed one frame of the render reference (the far end the echo comes from)."""
        ...

    def process_capture(self, pcm: bytes) -> bytes:
        """Process one capture frame and return the cleaned frame (same size).

        Raises:
            Exception: any runtime failure of the underlying library; the caller recovers.
        """
        ...

    def close(self) -> None:
        """Release native resources (idempotent)."""
        ...


_PKG = "openab_voice.providers"

APM_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="webrtc",
        module=f"{_PKG}.apm_livekit",
        requires=("livekit.rtc",),
        extra="audio",
        summary="WebRTC APM (AEC3, NS, AGC, HPF) through livekit.rtc.AudioProcessingModule",
    ),
    ProviderSpec(
        name="webrtc-audio-processing",
        module=f"{_PKG}.apm_webrtc_audio_processing",
        requires=("webrtc_audio_processing",),
        extra="webrtc-audio-processing",
        summary="webrtc-audio-processing 0.1.x (AEC2); needs swig to build",
    ),
    ProviderSpec(
        name="disabled",
        module=f"{_PKG}.apm_disabled",
        development_only=True,
        summary="no echo cancellation, noise suppression or gain control (development only, degraded)",
    ),
)


def apm_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[ApmConfig, AudioProcessor]:
    """A fresh registry of the audio processors shipped with openab_voice."""
    return ProviderRegistry("apm", APM_SPECS, importer=importer)
