"""Writing systems without spaces between words (Chinese, Japanese): what a unit of text is there.

English text is measured in words and cut at spaces. Chinese and Japanese put no space between words,
so the speaking path measures them in characters: a CJK character (a Han ideograph or a kana) is one
unit, a run of other letters is a word as before. Korean writes spaces between words and is not
treated here. Full-width punctuation (``。`` ``，`` ...) needs no space after it.

Two equivalences turn English measures into CJK ones (a Han character is one syllable):

- :data:`CJK_CHAR_WIDTH`: in *characters* of text, a CJK character counts as 3 Latin characters.
  Read aloud, English runs at about 13-15 characters a second, Mandarin at 4-5 syllables.
- :data:`CJK_CHARS_PER_WORD`: in *words*, an English word is 1.5 CJK characters (English averages
  about 1.5 syllables a word), so 4 words are 6 characters (:func:`chars_for_words`).

Pure: no I/O. Used by the segmenter and sanitizer (engine), the stability filter (stt) and Piper's
first synthesis unit (providers), which is why it lives at the providers layer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "CJK_CHARS",
    "CJK_CHARS_PER_WORD",
    "CJK_CHAR_WIDTH",
    "CJK_CLAUSE_MARKS",
    "CJK_CLOSERS",
    "CJK_PUNCTUATION",
    "CJK_TERMINATORS",
    "chars_for_words",
    "has_cjk",
    "index_at_width",
    "is_cjk",
    "join_sentences",
    "split_units",
    "width",
]

CJK_CHARS: Final = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u312f\u31a0-\u31bf"  # bopomofo
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
    "\uff66-\uff9d"  # half-width katakana
    "\U00020000-\U0003134f"  # extensions B-H
)
"""A regex character-class body (no brackets) of the characters that are one unit each."""

CJK_TERMINATORS: Final = "\u3002\uff01\uff1f"
"""Full-width sentence ends: ``。`` ``！`` ``？``."""

CJK_CLAUSE_MARKS: Final = "\uff0c\u3001\uff1b\uff1a"
"""Full-width clause marks: ``，`` ``、`` ``；`` ``：``."""

CJK_CLOSERS: Final = "\u300d\u300f\u201d\u2019\uff09\u3011\u300b\u3009\u3015"
"""What closes right after a sentence end and stays with it: ``」』”’）】》〉〕``."""

CJK_PUNCTUATION: Final = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
"""A regex character-class body: CJK symbols and punctuation, full-width punctuation (not the curly
quotes, ``…`` or ``—``, which English uses too)."""

CJK_CHAR_WIDTH: Final = 3
"""Latin characters a CJK character counts for in lengths of text (see the module doc)."""

CJK_CHARS_PER_WORD: Final = 1.5
"""CJK characters an English word counts for in counts of words (see the module doc)."""

_CJK: Final = re.compile(f"[{CJK_CHARS}]")
_UNITS: Final = re.compile(f"[{CJK_CHARS}]|[^\\s{CJK_CHARS}]+")


def is_cjk(ch: str) -> bool:
    """True when ``ch`` (one character) is a CJK character: one unit of text on its own."""
    return _CJK.match(ch) is not None


def has_cjk(text: str) -> bool:
    """True when ``text`` holds at least one CJK character."""
    return _CJK.search(text) is not None


def width(text: str) -> int:
    """Length of ``text`` in Latin characters: ``len(text)`` when it holds no CJK character."""
    return len(text) + (CJK_CHAR_WIDTH - 1) * len(_CJK.findall(text))


def index_at_width(text: str, target: int) -> int:
    """The length of the longest prefix of ``text`` whose :func:`width` is at most ``target``:
    ``min(target, len(text))`` for Latin text."""
    seen = 0
    for i, ch in enumerate(text):
        seen += CJK_CHAR_WIDTH if is_cjk(ch) else 1
        if seen > target:
            return i
    return len(text)


def split_units(text: str) -> list[str]:
    """``text`` in units: each CJK character alone, every other run between spaces as one word.

    ``"我用Python写代码"`` gives ``["我", "用", "Python", "写", "代", "码"]``; text without CJK
    characters gives ``text.split()``. Punctuation stays in the run it touches (``"码。"`` gives
    ``["码", "。"]``: a mark after a CJK character is a run of its own).
    """
    return _UNITS.findall(text)


def chars_for_words(words: int) -> int:
    """CJK characters equivalent to ``words`` English words (rounded up): 4 words are 6 characters."""
    return math.ceil(words * CJK_CHARS_PER_WORD)


_CJK_EDGE: Final = re.compile(f"[{CJK_CHARS}{CJK_PUNCTUATION}{CJK_CLOSERS}]")


def join_sentences(sentences: Iterable[str]) -> str:
    """Sentences as one text: a space between them, none where both sides are CJK (Chinese writes
    "你好。今天呢？", never "你好。 今天呢？")."""
    out = ""
    for sentence in sentences:
        if out and sentence and not (_CJK_EDGE.match(out[-1]) and _CJK_EDGE.match(sentence[0])):
            out += " "
        out += sentence
    return out
