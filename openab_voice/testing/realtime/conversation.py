"""The conversation a loopback session holds: SDK conversation items plus the audio behind them.

Each item is the SDK model the server would report (``RealtimeConversationItemUserMessage``,
``...AssistantMessage``, ``...FunctionCall``, ``...FunctionCallOutput`` ...) next to what only the
server knows: the PCM of an audio part, and for assistant speech where each word's audio ends.
``conversation.item.truncate`` cuts that audio at ``audio_end_ms`` and keeps only the words whose
audio was fully played, and the cut is recorded (:class:`Truncation`) so a test reads what the
server kept. An item still streaming (its response being cancelled, as on a barge-in) can be
truncated too: what its response streams after the cut is not kept. (The real API drops the whole transcript of a truncated item; the loopback keeps the
heard words, which is what a client's own heard-only context must match.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from openai.types.realtime import (
    RealtimeConversationItemAssistantMessage,
)
from openai.types.realtime.conversation_item import ConversationItem

from openab_voice.testing.realtime.session_config import PCM_RATE

__all__ = ["Conversation", "HeldItem", "ItemRefusal", "TimedWord", "Truncation", "audio_ms"]


def audio_ms(pcm: bytes, rate: int = PCM_RATE) -> float:
    """Duration of mono 16-bit PCM in milliseconds."""
    return len(pcm) / 2 / rate * 1000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedWord:
    """A word of assistant speech and the position (ms from the item's audio start) its audio ends."""

    text: str
    end_ms: float


@dataclass(slots=True, kw_only=True)
class HeldItem:
    """One conversation item and the server-side state behind it.

    Attributes:
        item: the SDK model, as the server reports it (truncation applied).
        audio: 24 kHz mono PCM16 of its audio part (user input or assistant speech), else empty.
        words: assistant speech: every word sent and where its audio ends.
        transcript: user audio: what the server's STT heard (None until transcribed).
        cut_ms: where a truncation cut its audio (None while untruncated).
    """

    item: ConversationItem
    audio: bytes = b""
    words: list[TimedWord] = field(default_factory=list)
    transcript: str | None = None
    cut_ms: int | None = None

    @property
    def id(self) -> str:
        assert self.item.id is not None  # the conversation assigns one on insertion
        return self.item.id

    def add_audio(self, pcm: bytes) -> None:
        """Append streamed speech; after a truncation nothing past the cut is kept."""
        if self.cut_ms is None:
            self.audio += pcm

    def add_word(self, word: TimedWord) -> None:
        """Append a streamed word; after a truncation only a word heard before the cut is kept."""
        if self.cut_ms is None or word.end_ms <= self.cut_ms:
            self.words.append(word)


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncation:
    """A ``conversation.item.truncate`` the server applied."""

    item_id: str
    content_index: int
    audio_end_ms: int
    audio_ms_before: float
    transcript_before: str
    transcript_kept: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRefusal:
    """Why an item operation was refused (the ``error`` event's fields)."""

    code: str
    message: str
    param: str


class Conversation:
    """The ordered items of one session."""

    def __init__(self) -> None:
        self._items: list[HeldItem] = []
        self.truncations: list[Truncation] = []

    @property
    def held(self) -> Sequence[HeldItem]:
        return tuple(self._items)

    @property
    def items(self) -> list[ConversationItem]:
        """The SDK items, in conversation order."""
        return [held.item for held in self._items]

    def get(self, item_id: str) -> HeldItem | None:
        return next((held for held in self._items if held.item.id == item_id), None)

    def last_id(self) -> str | None:
        return self._items[-1].id if self._items else None

    def insert(self, held: HeldItem, *, previous_item_id: str | None = None) -> str | None | ItemRefusal:
        """Add ``held`` after ``previous_item_id`` (``"root"``: first; None: last).

        Returns:
            The id of the item now before it (None at the start), or why it was refused.
        """
        if held.item.id is not None and self.get(held.item.id) is not None:
            return ItemRefusal(
                code="invalid_value",
                message=f"Item with id '{held.item.id}' already exists.",
                param="item.id",
            )
        if previous_item_id is None:
            index = len(self._items)
        elif previous_item_id == "root":
            index = 0
        else:
            before = self.get(previous_item_id)
            if before is None:
                return ItemRefusal(
                    code="invalid_value",
                    message=f"Previous item with id '{previous_item_id}' does not exist.",
                    param="previous_item_id",
                )
            index = self._items.index(before) + 1
        self._items.insert(index, held)
        return self._items[index - 1].id if index else None

    def delete(self, item_id: str) -> ItemRefusal | None:
        held = self.get(item_id)
        if held is None:
            return _no_item(item_id)
        self._items.remove(held)
        return None

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> Truncation | ItemRefusal:
        """Cut an assistant item's audio at ``audio_end_ms`` and its transcript to the words heard."""
        held = self.get(item_id)
        if held is None:
            return _no_item(item_id)
        item = held.item
        if not isinstance(item, RealtimeConversationItemAssistantMessage):
            return ItemRefusal(
                code="invalid_value", message="Only assistant messages can be truncated.", param="item_id"
            )
        if not 0 <= content_index < len(item.content) or item.content[content_index].type != "output_audio":
            return ItemRefusal(
                code="invalid_value",
                message=f"Content index {content_index} is not an audio part.",
                param="content_index",
            )
        duration = audio_ms(held.audio)
        if audio_end_ms < 0 or audio_end_ms > duration + 0.5:
            return ItemRefusal(
                code="invalid_value",
                message=f"Audio content of {duration:.0f}ms is already shorter than {audio_end_ms}ms.",
                param="audio_end_ms",
            )
        # The words streamed so far: an item still streaming has no transcript in its part yet.
        streamed = " ".join(word.text for word in held.words)
        before = streamed or item.content[content_index].transcript or ""
        held.words = [word for word in held.words if word.end_ms <= audio_end_ms]
        kept = " ".join(word.text for word in held.words)
        held.audio = held.audio[: int(audio_end_ms * PCM_RATE / 1000) * 2]
        held.cut_ms = audio_end_ms
        content = list(item.content)
        content[content_index] = content[content_index].model_copy(update={"transcript": kept})
        held.item = item.model_copy(update={"content": content})
        record = Truncation(
            item_id=item_id,
            content_index=content_index,
            audio_end_ms=audio_end_ms,
            audio_ms_before=duration,
            transcript_before=before,
            transcript_kept=kept,
        )
        self.truncations.append(record)
        return record


def _no_item(item_id: str) -> ItemRefusal:
    return ItemRefusal(code="item_not_found", message=f"Item with id '{item_id}' not found.", param="item_id")
