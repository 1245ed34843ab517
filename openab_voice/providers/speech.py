"""Provider seams for the conversation: speech-to-text, text-to-speech and the chat model.

Each seam is a :class:`typing.Protocol` with a frozen capabilities dataclass; implementations live
one per module (``stt_faster_whisper``, ``tts_piper``, ``tts_openai``, ``chat_openai``,
``chat_llama``) and are created through lazy registries, so an optional dependency is imported only
when its provider is selected, and a missing one is a ``ProviderUnavailable`` naming the extra.

Provider output (transcripts, model text, tool calls) is untrusted data: it can propose, never
approve.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

# --- speech to text -------------------------------------------------------------------------------


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
