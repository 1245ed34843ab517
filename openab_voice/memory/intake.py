"""The spoken "remember that ..." path: a final transcript that starts with it saves a memory.

Like the task phrase (:mod:`openab_voice.actions.phrases`), it works with any chat model (the offline
one included) or with the dialogue off: the phrase addresses the bot by itself, a wake name in front
is allowed, and the session's transcript desk offers it every final before the conversation
(:meth:`RememberIntake.offer`: parsed once), so a final it takes is never a dialogue turn. What is
saved is the rest of the utterance, under the transcript's speaker (SSRC attribution), through the same save as the
``memory_save`` tool: the sensitivity filter refuses credentials and the like, and the bot says why.

In Chinese the phrase is an imperative "记住…", "请记住…", "記得…", "记下来…" (simplified or
traditional), with the same rules; a question ("你还记得…吗", "记得那部电影吗？") or a statement
("我记得…", "记住了") is not the phrase. The acknowledgement is said in the phrase's language.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Final, Protocol

from openab_voice.engine.turns import is_preamble
from openab_voice.memory.long_term import LongTermMemory, MemoryKind, SaveRefused
from openab_voice.stt.events import TranscriptFinal
from openab_voice.tasks import TaskOwner

__all__ = ["ACK_SAVED", "ACK_SAVED_ZH", "RememberIntake", "remembered_text"]

log = logging.getLogger(__name__)

ACK_SAVED: Final = "Okay, I'll remember that."
ACK_SAVED_ZH: Final = "好的，我记住了。"
"""The acknowledgement of a phrase said in Chinese."""
_WORD = re.compile(r"[A-Za-z0-9']+")
_LEADING_FILLER = frozenset(
    {"hey", "ok", "okay", "please", "so", "um", "uh", "and"}
    | {"嘿", "好", "好的", "请", "請", "那", "那么", "那麼", "嗯", "呃", "帮我", "幫我", "还有", "還有"}
)
_MAX_PREFIX_WORDS = 5
# "remember", "keep in mind", "write down"; not "记住了" (remembered), "记住吗" / "记住没" (asking).
_CHINESE_PHRASE = re.compile("(?:记住|記住|记得|記得|记下来|記下來|记下|記下)(?![了吗嗎么麼没沒])")
_QUESTION = re.compile("(?:[吗嗎么麼][\\s\u3002.!\uff01?\uff1f]*|[?\uff1f]\\s*)$")
_BEFORE_FACT = ":,;.-–— \u3000\uff1a\uff0c\uff1b\u3002\u3001"
_PREFERENCE = re.compile(
    r"\b(prefer|prefers|like|likes|love|loves|hate|hates|favou?rite)\b|喜欢|喜歡|偏好|讨厌|討厭", re.I
)


class Say(Protocol):
    async def __call__(self, text: str) -> None: ...


def remembered_text(text: str, *, wake_name: str | None = None) -> str | None:
    """What to remember when ``text`` asks for it, else None.

    >>> remembered_text("Remember that Alice prefers tea.")
    'Alice prefers tea.'
    >>> remembered_text("Jarvis, please remember the build runs at noon", wake_name="Jarvis")
    'the build runs at noon'
    >>> remembered_text("贾维斯，请记住：周五开会", wake_name="Jarvis, 贾维斯")
    '周五开会'
    """
    request = _request(text, wake_name)
    return request[0] if request is not None else None


def _request(text: str, wake_name: str | None) -> tuple[str, str] | None:
    """What to remember and the acknowledgement in the phrase's language, when ``text`` asks."""
    found = min(filter(None, (_english_phrase(text), _chinese_phrase(text))), default=None)
    if found is None:
        return None
    start, end, ack = found
    if not is_preamble(text[:start], wake_name, fillers=_LEADING_FILLER):
        return None  # "do you remember ..." is a question, not the phrase
    rest = text[end:].strip().lstrip(_BEFORE_FACT).strip()
    return (rest, ack) if any(ch.isalnum() for ch in rest) else None


def _english_phrase(text: str) -> tuple[int, int, str] | None:
    """Where "remember [that]" is in ``text``, if it is among its first words."""
    words = [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    for i in range(min(len(words), _MAX_PREFIX_WORDS + 1)):
        if words[i][0] != "remember":
            continue
        end = words[i][2]
        if i + 1 < len(words) and words[i + 1][0] == "that":
            end = words[i + 1][2]
        return words[i][1], end, ACK_SAVED
    return None


def _chinese_phrase(text: str) -> tuple[int, int, str] | None:
    """Where "记住" (or a form of it) is in ``text``, unless what follows is a question."""
    match = _CHINESE_PHRASE.search(text)
    if match is None or _QUESTION.search(text, match.end()):
        return None
    return match.start(), match.end(), ACK_SAVED_ZH


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
        request = _request(event.text, self._wake_name())
        if request is None:
            return False
        fact, ack = request
        self._tasks.spawn(self._save(event.speaker_id, fact, ack), name=f"remember-{event.utterance_id}")
        return True

    async def _save(self, speaker_id: str, fact: str, ack: str) -> None:
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
            await self._say(ack)

    async def aclose(self) -> None:
        """Wait for the saves in flight (the desk offers nothing more once the session closes)."""
        if self._tasks:
            await asyncio.wait(self._tasks.tasks)  # they finish: none is cancelled
        await self._tasks.aclose()
