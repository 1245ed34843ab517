"""Provider seams for the audio front end: the audio processor (APM) and the voice activity detector.

Each seam is a :class:`typing.Protocol` plus a frozen capabilities dataclass. Implementations live one
per module (``apm_livekit``, ``apm_disabled``, ``vad_silero`` ...) and are created through the
lazy registries in :mod:`openab_voice.providers.registry`, so an optional dependency is only
imported when its provider is selected.

Both seams work on mono signed 16-bit PCM at one sample rate, the front end's internal format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


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


@dataclass(frozen=True, slots=True, kw_only=True)
class VadConfig:
    """What the front end asks of a voice activity detector.

    Attributes:
        sample_rate: Hz of the processed capture.
        webrtcvad_mode: aggressiveness 0-3 (only the ``webrtcvad`` provider reads it).
    """

    sample_rate: int
    webrtcvad_mode: int = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class VadCapabilities:
    """What a VAD instance does.

    Attributes:
        name: registry name.
        frame_samples: samples per call to :meth:`VoiceActivityDetector.speech_probability`.
        sample_rate: the rate it was created for.
        probabilistic: False when the score is a hard 0/1 decision (webrtcvad).
    """

    name: str
    frame_samples: int
    sample_rate: int
    probabilistic: bool = True


@runtime_checkable
class VoiceActivityDetector(Protocol):
    """A streaming, stateful speech scorer for one speaker."""

    @property
    def capabilities(self) -> VadCapabilities:
        """What this instance does."""
        ...

    def speech_probability(self, samples: npt.NDArray[np.int16]) -> float:
        """Score exactly ``capabilities.frame_samples`` mono samples; 0.0 (silence) to 1.0 (speech)."""
        ...

    def reset(self) -> None:
        """Forget the recurrent state (start of a new stream)."""
        ...

    def close(self) -> None:
        """Release resources (idempotent)."""
        ...
