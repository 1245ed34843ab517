"""The spoken "remember that ..." path: a final transcript that starts with it saves a memory.

Like the task phrase (:mod:`openab_voice.actions.phrases`), it works with any chat model (the offline
one included) or with the dialogue off: the phrase addresses the bot by itself, a wake name in front
is allowed, and the session's transcript desk offers it every final before the conversation
(:meth:`RememberIntake.offer`: parsed once), so a final it takes is never a dialogue turn. What is
saved is the rest of the utterance, under the transcript's speaker (SSRC attribution), through the same save as the
``memory_save`` tool: the sensitivity filter refuses credentials and the like, and the bot says why.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Final, Protocol

from openab_voice.engine.turns import addresses
from openab_voice.memory.long_term import LongTermMemory, MemoryKind, SaveRefused
from openab_voice.stt.events import TranscriptFinal
from openab_voice.tasks import TaskOwner

__all__ = ["ACK_SAVED", "RememberIntake", "remembered_text"]

log = logging.getLogger(__name__)

ACK_SAVED: Final = "Okay, I'll remember that."
_WORD = re.compile(r"[A-Za-z0-9']+")
_LEADING_FILLER = frozenset({"hey", "ok", "okay", "please", "so", "um", "uh", "and"})
_MAX_PREFIX_WORDS = 5
_PREFERENCE = re.compile(r"\b(prefer|prefers|like|likes|love|loves|hate|hates|favou?rite)\b", re.I)


class Say(Protocol):
    async def __call__(self, text: str) -> None: ...


def remembered_text(text: str, *, wake_name: str | None = None) -> str | None:
    """What to remember when ``text`` asks for it, else None.

    >>> remembered_text("Remember that Alice prefers tea.")
    'Alice prefers tea.'
    >>> remembered_text("Jarvis, please remember the build runs at noon", wake_name="Jarvis")
    'the build runs at noon'
    >>> remembered_text("do you remember that film") is None
    True
    """
    words = [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    for i in range(min(len(words), _MAX_PREFIX_WORDS) + 1):
        if i >= len(words) or words[i][0] != "remember":
            continue
        prefix = [w for w, _, _ in words[:i] if w not in _LEADING_FILLER]
        if prefix and not (wake_name and addresses(" ".join(prefix), wake_name)):
            return None  # "do you remember ..." is a question, not the phrase
        end = words[i][2]
        if i + 1 < len(words) and words[i + 1][0] == "that":
            end = words[i + 1][2]
        rest = text[end:].strip().lstrip(":,;.-–— ").strip()
        return rest if any(ch.isalnum() for ch in rest) else None
    return None


class RememberIntake:
    """Takes one voice session's finals that say "remember that ..." and saves what follows.

    Args:
        guild_id: whose memory it goes into.
        wake_name: the current wake name (it may be said before the phrase).
        say: speaks the short acknowledgment or the refusal.
    """

    def __init__(
        self,
        memory: LongTermMemory,
        *,
        guild_id: int,
        wake_name: Callable[[], str | None],
        say: Say,
    ) -> None:
        self._memory = memory
        self._guild_id = guild_id
        self._wake_name = wake_name
        self._say = say
        self._tasks = TaskOwner("remember intake")  # the saves in flight

    def claims(self, text: str) -> bool:
        """Whether ``text`` asks to remember something (asked for speculative finals; saves nothing)."""
        return remembered_text(text, wake_name=self._wake_name()) is not None

    def offer(self, event: TranscriptFinal) -> bool:
        """Save what ``event`` asks to remember (parsed once); whether it asked."""
        fact = remembered_text(event.text, wake_name=self._wake_name())
        if fact is None:
            return False
        self._tasks.spawn(self._save(event.speaker_id, fact), name=f"remember-{event.utterance_id}")
        return True

    async def _save(self, speaker_id: str, fact: str) -> None:
        kind = MemoryKind.PREFERENCE if _PREFERENCE.search(fact) else MemoryKind.FACT
        try:
            outcome = await asyncio.to_thread(
                self._memory.save,
                guild_id=self._guild_id,
                kind=kind,
                text=fact,
                speaker_id=speaker_id,
                source="phrase",
            )
        except Exception:  # the store failed: logged, and the speaker hears it was not kept
            log.exception("remember phrase: save failed")
            await self._say("I could not save that.")
            return
        if isinstance(outcome, SaveRefused):
            await self._say(f"I won't remember that: {outcome.reason}.")
        else:
            await self._say(ACK_SAVED)

    async def aclose(self) -> None:
        """Wait for the saves in flight (the desk offers nothing more once the session closes)."""
        if self._tasks:
            await asyncio.wait(self._tasks.tasks)  # they finish: none is cancelled
        await self._tasks.aclose()
