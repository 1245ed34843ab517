"""Short-term conversation context for one voice channel.

What the model sees is what happened in the room: user turns attributed to their speaker (``name``
on every message; ``Bob says: ...`` in the text only when several people spoke, never a
transcript-shaped ``Bob: ...`` label), only the assistant text that was *heard*
(:meth:`record_heard`), and channel notes (what humans said to each other, quoted). Bounded by
``max_turns`` and ``max_notes``; tool calls live only as long as their response. Not thread-safe: the
conversation manager's loop owns it. Long-term memory is not history: :func:`with_memory` adds a
turn's recall as one system message, never recorded here. Why: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from openab_voice.providers.chat import ChatMessage

__all__ = ["ChannelNote", "Exchange", "MemoryRecall", "ShortTermContext", "UserUtterance", "with_memory"]


class MemoryRecall(Protocol):
    """Long-term memory for a turn (``openab_voice.memory.recall.MemoryContext``)."""

    async def recall(self, *, speaker_id: str | None, text: str) -> Sequence[str]:
        """What is remembered that bears on ``text`` (one line each, most relevant first)."""
        ...


def with_memory(messages: Sequence[ChatMessage], lines: Sequence[str]) -> list[ChatMessage]:
    """``messages`` with ``lines`` as one system message after the leading system messages."""
    out = list(messages)
    if not lines:
        return out
    at = next((i for i, m in enumerate(out) if m.role != "system"), len(out))
    body = "\n".join(f"- {line}" for line in lines)
    note = (
        "From your long-term memory (saved earlier in this server; it may be out of date, and it is "
        f"not something anyone just said):\n{body}"
    )
    out.insert(at, ChatMessage(role="system", content=note))
    return out


_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class UserUtterance:
    """A user turn: a final transcript the turn policy accepted."""

    turn_id: str
    speaker_id: str
    speaker_name: str
    text: str
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelNote:
    """A human's words not addressed to the bot."""

    speaker_id: str
    speaker_name: str
    text: str
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One user turn and the part of the bot's reply that was heard."""

    user: UserUtterance
    assistant: str = ""


def message_name(display_name: str) -> str | None:
    """A display name in the form chat APIs accept for ``name`` (``^[A-Za-z0-9_-]{1,64}$``)."""
    safe = _NAME_UNSAFE.sub("_", display_name).strip("_")[:64]
    return safe or None


class ShortTermContext:
    """The bounded, heard-only conversation history.

    Args:
        system_prompt: the first message of every request.
        max_turns: user turns kept.
        max_notes: channel notes kept.
    """

    def __init__(self, *, system_prompt: str, max_turns: int, max_notes: int) -> None:
        self._system_prompt = system_prompt
        self._max_turns = max_turns
        self._max_notes = max_notes
        self._entries: list[Exchange | ChannelNote] = []

    @property
    def exchanges(self) -> tuple[Exchange, ...]:
        return tuple(e for e in self._entries if isinstance(e, Exchange))

    @property
    def notes(self) -> tuple[ChannelNote, ...]:
        return tuple(e for e in self._entries if isinstance(e, ChannelNote))

    def record_turn(self, user: UserUtterance) -> None:
        """Add a user turn (once: recording the same turn id again changes nothing)."""
        if any(isinstance(e, Exchange) and e.user.turn_id == user.turn_id for e in self._entries):
            return
        self._entries.append(Exchange(user=user))
        self._trim()

    def record_heard(self, turn_id: str, text: str) -> bool:
        """Append heard assistant text to ``turn_id``'s reply; False when that turn is not kept."""
        text = text.strip()
        if not text:
            return False
        for i in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[i]
            if isinstance(entry, Exchange) and entry.user.turn_id == turn_id:
                joined = f"{entry.assistant} {text}" if entry.assistant else text
                self._entries[i] = replace(entry, assistant=joined)
                return True
        return False

    def add_note(self, note: ChannelNote) -> None:
        if self._max_notes == 0 or not note.text.strip():
            return
        self._entries.append(note)
        self._trim()

    def messages(self, pending: UserUtterance | None = None) -> list[ChatMessage]:
        """The request for the model: system prompt, history, then ``pending`` (not yet recorded)."""
        users = [e.user for e in self._entries if isinstance(e, Exchange)]
        if pending is not None:
            users.append(pending)
        names = list(dict.fromkeys(u.speaker_name for u in users))
        several = len({u.speaker_id for u in users}) > 1
        out = [ChatMessage(role="system", content=self._system_prompt)]
        if several:
            out.append(ChatMessage(role="system", content=f"You are talking with {_listing(names)}."))
        for entry in self._entries:
            if isinstance(entry, ChannelNote):
                said = f'{entry.speaker_name} said to the others, not to you: "{entry.text}"'
                out.append(ChatMessage(role="system", content=said))
                continue
            out.append(_user_message(entry.user, attributed=several))
            if entry.assistant:
                out.append(ChatMessage(role="assistant", content=entry.assistant))
        if pending is not None:
            out.append(_user_message(pending, attributed=several))
        return out

    def dump(self) -> list[dict[str, str]]:
        """A JSON-friendly view (self-test, reports): role, speaker and text per entry."""
        rows: list[dict[str, str]] = []
        for entry in self._entries:
            if isinstance(entry, ChannelNote):
                rows.append({"role": "note", "speaker": entry.speaker_id, "text": entry.text})
                continue
            rows.append({"role": "user", "speaker": entry.user.speaker_id, "text": entry.user.text})
            if entry.assistant:
                rows.append({"role": "assistant", "speaker": "", "text": entry.assistant})
        return rows

    def _trim(self) -> None:
        while len(self.exchanges) > self._max_turns:
            # Drop the oldest turn and any notes older than it: they are older context still.
            first = next(i for i, e in enumerate(self._entries) if isinstance(e, Exchange))
            del self._entries[: first + 1]
        while len(self.notes) > self._max_notes:
            first = next(i for i, e in enumerate(self._entries) if isinstance(e, ChannelNote))
            del self._entries[first]


def _user_message(user: UserUtterance, *, attributed: bool) -> ChatMessage:
    content = f"{user.speaker_name} says: {user.text}" if attributed else user.text
    return ChatMessage(role="user", content=content, name=message_name(user.speaker_name))


def _listing(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
