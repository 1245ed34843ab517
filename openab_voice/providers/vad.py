"""The voice activity detector seam: its config, its capabilities, the Protocol and the registry of the
detectors shipped with openab_voice (``vad_silero``, ``vad_webrtc``), imported only when selected.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec


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


_PKG = "openab_voice.providers"

VAD_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="silero",
        module=f"{_PKG}.vad_silero",
        requires=("onnxruntime", "faster_whisper"),
        extra="audio",
        summary="Silero VAD v6 ONNX (shipped with faster-whisper) on onnxruntime",
    ),
    ProviderSpec(
        name="webrtcvad",
        module=f"{_PKG}.vad_webrtc",
        requires=("webrtcvad",),
        extra="webrtcvad",
        summary="WebRTC GMM VAD (webrtcvad-wheels); fast, coarse",
    ),
)


def vad_registry(
    importer: Importer = importlib.import_module,
) -> ProviderRegistry[VadConfig, VoiceActivityDetector]:
    """A fresh registry of the voice activity detectors shipped with openab_voice."""
    return ProviderRegistry("vad", VAD_SPECS, importer=importer)
