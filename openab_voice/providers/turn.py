"""The end-of-turn detector seam: its config, its capabilities, the Protocol and the registry of the
detectors shipped with openab_voice (``turn_smart``: Smart Turn v3.2), imported only when selected.

A detector scores the audio of a speaker's turn so far, up to a pause in it, as the probability
that the turn is complete. It is asked once per pause (:mod:`openab_voice.stt.endpointing` decides
when and what the answer does); it holds no per-speaker state, so one instance serves everyone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnConfig:
    """What the transcriber asks of an end-of-turn detector.

    Attributes:
        model_path: a model file to use instead of the one the provider finds itself.
        cpu_threads: onnxruntime intra-op threads (1: it must not take both cores from the audio plane).
    """

    model_path: str | None = None
    cpu_threads: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCapabilities:
    """What a detector instance does.

    Attributes:
        name: registry name.
        sample_rate: Hz of the audio it scores.
        max_seconds: the most recent audio it looks at; older audio is ignored.
    """

    name: str
    sample_rate: int
    max_seconds: float


@runtime_checkable
class TurnDetector(Protocol):
    """Scores a turn's audio up to a pause: is the speaker done?"""

    @property
    def capabilities(self) -> TurnCapabilities:
        """What this instance does."""
        ...

    def completion_probability(self, samples: npt.NDArray[np.int16]) -> float:
        """P(the turn is complete) for mono ``samples`` at ``capabilities.sample_rate``, ending now.

        Blocking (a model run): call it off the event loop. Thread-safe.
        """
        ...

    def close(self) -> None:
        """Release resources (idempotent)."""
        ...


_PKG = "openab_voice.providers"

TURN_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="smart-turn",
        module=f"{_PKG}.turn_smart",
        requires=("onnxruntime", "faster_whisper"),
        extra="audio",
        summary="Pipecat's Smart Turn v3.2 (BSD-2, shipped in the pipecat-ai wheel) on onnxruntime",
    ),
)


def turn_registry(
    importer: Importer = importlib.import_module,
) -> ProviderRegistry[TurnConfig, TurnDetector]:
    """A fresh registry of the end-of-turn detectors shipped with openab_voice."""
    return ProviderRegistry("turn", TURN_SPECS, importer=importer)
