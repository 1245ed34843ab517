"""Backchannels: the short "yeah", "mm-hmm", "okay" a listener says to show they follow, not to take
the floor.

:func:`classify` sorts what a speaker said over the bot into a :class:`Verdict`. A backchannel is
short (at most :data:`MAX_WORDS` words, spoken in at most :data:`MAX_DURATION_S`) and made only of
acknowledgement words and phrases (:data:`BACKCHANNEL_PHRASES`). A cut word ("wait", "stop", "hold
on", "no": :data:`CUT_PHRASES`) or the wake name anywhere makes it a command, whatever else was said;
any other word makes it speech. Only a backchannel lets the bot go on; deciding when to ask is the
interruption controller's (:mod:`~openab_voice.engine.interruption`). Pure: no state, no I/O.
Why these words and bounds: docs/adr/0019-backchannels.md.

Chinese has its own acknowledgements ("嗯", "对", "好的", "是的") and cut words ("等等", "停",
"不对"), in simplified and traditional characters. It is written without spaces, so its words are
the listed ones, longest first, and any other character is a word of its own ("好的我知道了" is two
words, "对对对" three).
"""

from __future__ import annotations

import re
from enum import StrEnum

from openab_voice.engine.turns import wake_names
from openab_voice.providers.scripts import CJK_CHARS

__all__ = [
    "BACKCHANNEL_PHRASES",
    "CUT_PHRASES",
    "MAX_DURATION_S",
    "MAX_WORDS",
    "Verdict",
    "classify",
    "words_of",
]

MAX_WORDS = 4
"""More words than this is never a backchannel ("yeah okay got it" is three)."""
MAX_DURATION_S = 1.5
"""Speech longer than this is never a backchannel (a Piper "Yeah." is ~0.4 s, "Okay, got it." ~0.8 s)."""


class Verdict(StrEnum):
    BACKCHANNEL = "backchannel"  # acknowledgement only, and short: the bot goes on
    COMMAND = "command"  # a cut word or the wake name: always a real interruption
    SPEECH = "speech"  # other words, or too long: a real interruption (or a turn)
    EMPTY = "empty"  # no words at all: for the false-interruption rules to decide


_CHINESE_BACKCHANNELS = (
    # agreement
    "对", "對", "对的", "對的", "是", "是的", "没错", "沒錯", "确实", "確實", "当然", "當然", "好", "好的",
    "好吧", "行", "可以",
    # continuers
    "嗯", "恩", "嗯哼", "继续", "繼續",
    # acknowledgement
    "明白", "明白了", "我明白", "我明白了", "知道了", "我知道", "我知道了", "懂了", "我懂了", "了解",
    "瞭解", "了解了", "收到", "原来如此", "原來如此", "有道理", "不错", "不錯", "很好", "谢谢", "謝謝",
    # surprise tokens
    "哦", "噢", "喔", "啊", "哇",
)  # fmt: skip
_CHINESE_CUTS = (
    "等等", "等一下", "停", "停下", "停一下", "别说了", "別說了", "不", "不对", "不對", "不是", "不要",
    "没有", "沒有", "慢着", "慢著", "打住", "闭嘴", "閉嘴", "安静", "安靜", "够了", "夠了", "抱歉",
    "对不起", "對不起", "不好意思", "但是", "可是", "不过", "不過", "其实", "其實", "取消",
)  # fmt: skip
# One Chinese word: a listed one (longest first, so "不错" is not "不" and "错"), else one character.
_CHINESE_WORD = re.compile(
    "|".join(sorted(_CHINESE_BACKCHANNELS + _CHINESE_CUTS, key=len, reverse=True)) + f"|[{CJK_CHARS}]"
)


def words_of(text: str) -> tuple[str, ...]:
    """``text`` as lower-case words: punctuation dropped, hyphens joined ("Mm-hmm" -> "mmhmm") and a
    letter held three times or more cut to two ("Mmm" -> "mm"), as Whisper spells the same sound;
    Chinese split into words as the module doc says."""
    lowered = text.lower().replace("-", "").replace("\u2019", "'")
    cleaned = re.sub(f"[^a-z0-9' {CJK_CHARS}]+", " ", lowered)
    squeezed = re.sub(r"([a-z])\1{2,}", r"\1\1", cleaned)
    spaced = _CHINESE_WORD.sub(r" \g<0> ", squeezed)
    return tuple(w.strip("'") for w in spaced.split() if w.strip("'"))


def _phrases(*texts: str) -> frozenset[tuple[str, ...]]:
    return frozenset(words_of(t) for t in texts)


BACKCHANNEL_PHRASES: frozenset[tuple[str, ...]] = _phrases(
    # agreement
    "yeah", "yea", "yep", "yup", "yes", "ya", "right", "sure", "true", "exactly", "indeed", "totally",
    "absolutely", "correct", "that's right", "that's true", "of course", "fair enough",
    # continuers ("uh-uh" is a no, and is not here)
    "mm", "mmhm", "mm-hmm", "mhm", "hm", "hmm", "uh-huh", "uh huh", "mm hmm", "go on",
    # acknowledgement
    "okay", "ok", "o k", "okey", "alright", "all right", "i see", "got it", "gotcha", "i know",
    "makes sense", "sounds good", "cool", "nice", "great", "good", "perfect", "interesting",
    "thanks", "thank you",
    # surprise tokens, alone or before another ("oh, I see")
    "oh", "ah", "ahh", "aha", "wow",
    *_CHINESE_BACKCHANNELS,
)  # fmt: skip
"""Acknowledgements, as :func:`words_of` spells them; an utterance made of these only is a backchannel."""

CUT_PHRASES: frozenset[tuple[str, ...]] = _phrases(
    "wait", "stop", "hold on", "hang on", "no", "nope", "pause", "quiet", "shut up", "enough",
    "excuse me", "sorry", "but", "actually", "cancel", *_CHINESE_CUTS,
)  # fmt: skip
"""Words that stop the bot even inside an acknowledgement ("okay, wait", "yeah but", "no")."""

_LONGEST = max(len(p) for p in BACKCHANNEL_PHRASES | CUT_PHRASES)


def _contains(words: tuple[str, ...], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(words[i : i + n] == phrase for i in range(len(words) - n + 1))


def _covered(words: tuple[str, ...]) -> bool:
    """Whether ``words`` is a run of backchannel phrases (longest phrase first at each word)."""
    i = 0
    while i < len(words):
        for n in range(min(_LONGEST, len(words) - i), 0, -1):
            if words[i : i + n] in BACKCHANNEL_PHRASES:
                i += n
                break
        else:
            return False
    return True


def classify(text: str, *, duration_s: float | None = None, wake_name: str | None = None) -> Verdict:
    """What ``text``, said over the bot, is.

    Args:
        text: what was heard (a stable partial or a final).
        duration_s: how long the speech lasted (None: unknown yet, no bound applied).
        wake_name: the bot's name (or names, separated by commas); saying one is a command.
    """
    words = words_of(text)
    if not words:
        return Verdict.EMPTY
    names = (words_of(name) for name in wake_names(wake_name or ""))
    named = any(name and _contains(words, name) for name in names)
    if named or any(_contains(words, cut) for cut in CUT_PHRASES):
        return Verdict.COMMAND
    if len(words) > MAX_WORDS or (duration_s is not None and duration_s > MAX_DURATION_S):
        return Verdict.SPEECH
    return Verdict.BACKCHANNEL if _covered(words) else Verdict.SPEECH
