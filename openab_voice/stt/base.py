"""The speech-to-text seam: the batch Protocol every STT provider implements, what it can do, its
settings, and the registry that creates one by name (the implementation's module is imported only
then, so a missing optional dependency is a ``ProviderUnavailable`` naming the extra).

Provider output (transcripts) is untrusted data: it can propose, never approve.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from openab_voice.errors import ConfigError
from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

__all__ = [
    "STT_SPECS",
    "FinalMode",
    "Hypothesis",
    "ModelName",
    "SpeechToText",
    "SttCapabilities",
    "SttConfig",
    "stt_registry",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SttCapabilities:
    """What a speech-to-text provider does.

    Attributes:
        name: registry name.
        streaming: produces partial hypotheses while audio arrives (not only a final per utterance).
        sample_rate: the mono rate it consumes (the front end's internal rate).
        languages: language codes it can transcribe (``("en",)`` for tiny.en).
        model: model identifier, for reports.
        batch: :meth:`SpeechToText.transcribe_batch` decodes several utterances in one pass, for
            less than they cost one after the other (several people talking at once).
    """

    name: str
    streaming: bool
    sample_rate: int
    languages: tuple[str, ...]
    model: str
    batch: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Hypothesis:
    """One decode of an utterance so far.

    Attributes:
        text: the whole hypothesis.
        confidence: 0..1 (e.g. exp of the mean token log-probability); None when unknown.
        no_speech_prob: the model's probability that the audio holds no speech, if it has one.
        doubtful: a ``quick`` final whose first pass the provider's own checks doubt: asked for the
            best decode, it would have decoded again (slower) instead of returning this.
    """

    text: str
    confidence: float | None = None
    no_speech_prob: float | None = None
    doubtful: bool = False


@runtime_checkable
class SpeechToText(Protocol):
    """Decodes mono int16 audio. Calls are blocking and CPU-bound: run them off the event loop."""

    @property
    def capabilities(self) -> SttCapabilities: ...

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        """Decode ``samples`` (one utterance from its start). ``final`` asks for the best decode;
        ``quick`` (with ``final``, for a final that may never be used) for its first pass only: a
        provider that would decode a doubtful first pass again returns it marked ``doubtful``."""
        ...

    def transcribe_batch(
        self, requests: Sequence[tuple[npt.NDArray[np.int16], bool, bool]]
    ) -> list[Hypothesis | Exception]:
        """Decode several ``(samples, final, quick)`` at once (only when ``capabilities.batch``); one
        result per request, in order: a hypothesis, or the error that request alone met."""
        ...

    def close(self) -> None: ...


ModelName = Literal["tiny.en", "base"]
FinalMode = Literal["auto", "fast", "padded"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SttConfig:
    """faster-whisper provider settings.

    Attributes:
        model: ``"tiny.en"`` (English only, fastest) or ``"base"`` (multilingual).
        compute_type: CTranslate2 quantization (``"int8"`` on CPU).
        cpu_threads: CTranslate2 intra-op threads per decode.
        beam_size: 1 is greedy search (what the latency figures assume).
        language: language code, or None to detect it per decode (multilingual models only).
        device: CTranslate2 device (``"cpu"``; ``"cuda"`` where a GPU build is installed).
        final_mode: ``"auto"`` (fast path, padded fallback when suspicious), ``"fast"`` or ``"padded"``.
        tail_pad_ms: silence appended to the fast path's encoder input (helps the model end).
        max_tokens_per_second: token budget per second of audio (speech is ~3-4 tokens/s).
        token_margin: extra tokens on top of the per-second budget.
        stage_tokens_per_second: the fast path decodes in stages: first this many tokens per second
            of audio plus ``stage_margin``, more only when the text has neither ended nor started
            over by then (0: one stage, the whole budget).
        stage_margin: extra tokens in a stage (at least 3: a loop shows once 3 tokens are copied).
        min_tokens_per_second: in ``"auto"``, a guard-cut final below this rate is re-decoded padded.
        fallback_confidence: in ``"auto"``, a final below this confidence (with speech) is re-decoded.
        model_path: a local CTranslate2 Whisper directory that overrides ``model``.
        cache_dir: where the base model is assembled (default ``$XDG_CACHE_HOME/openab-voice``).
    """

    model: ModelName = default_of(VoiceSettings, "stt_model")
    compute_type: str = "int8"
    cpu_threads: int = 2
    beam_size: int = 1
    language: str | None = "en"
    device: str = "cpu"
    final_mode: FinalMode = "auto"
    tail_pad_ms: int = 500
    max_tokens_per_second: float = 6.0
    token_margin: int = 6
    stage_tokens_per_second: float = 3.0
    stage_margin: int = 5
    min_tokens_per_second: float = 1.0
    fallback_confidence: float = 0.5
    model_path: str | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        def bad(setting: str, why: str) -> ConfigError:
            return ConfigError(f"stt {setting}: {why}", setting=f"stt_{setting}")

        if self.model not in ("tiny.en", "base"):
            raise bad("model", "must be 'tiny.en' or 'base'")
        if self.final_mode not in ("auto", "fast", "padded"):
            raise bad("final_mode", "must be 'auto', 'fast' or 'padded'")
        if self.cpu_threads < 0 or self.beam_size < 1:
            raise bad("cpu_threads", "cpu_threads must be >= 0 and beam_size >= 1")
        if self.model == "tiny.en" and self.model_path is None and self.language not in (None, "en"):
            raise bad("language", "tiny.en transcribes English only")
        if self.max_tokens_per_second <= 0 or self.token_margin < 1 or not 0 <= self.tail_pad_ms <= 5000:
            raise bad("max_tokens_per_second", "token budget and tail padding must be positive")
        if self.stage_tokens_per_second < 0 or self.stage_margin < 3:
            raise bad("stage_tokens_per_second", "must be >= 0, with a stage_margin of at least 3")


STT_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="faster-whisper",
        module="openab_voice.stt.faster_whisper",
        requires=("faster_whisper", "ctranslate2"),
        extra="audio",
        summary="faster-whisper (CTranslate2) with packaged Whisper weights, int8 on CPU",
    ),
)


def stt_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[Any, SpeechToText]:
    """A fresh registry of the speech-to-text providers (the config type is the STT module's own)."""
    return ProviderRegistry("stt", STT_SPECS, importer=importer)
