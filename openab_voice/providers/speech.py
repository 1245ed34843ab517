"""Provider seams for the conversation: text-to-speech and the chat model (speech-to-text has its own
home, :mod:`openab_voice.stt`).

Each seam is a :class:`typing.Protocol` with a frozen capabilities dataclass; implementations live
one per module (``tts_piper``, ``tts_openai``, ``chat_openai``, ``chat_llama``) and are created through lazy registries, so an optional dependency is imported only
when its provider is selected, and a missing one is a ``ProviderUnavailable`` naming the extra.

Provider output (transcripts, model text, tool calls) is untrusted data: it can propose, never
approve.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

# --- text to speech -------------------------------------------------------------------------------


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


# --- chat model -----------------------------------------------------------------------------------


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
