"""A Chinese wake name is heard by its sound, not its characters.

Whisper writes a name it does not know with whatever characters sound like it: "贾维斯" (Jarvis) came
back from the multilingual base as 假为是, 脚圍絲, 蔣維斯, 講為私 and 價為斯, and never as 贾维斯 (six
shipped-voice lines, ADR 0023). So, like the letter tolerance of a Latin name, a CJK name matches a run
of as many CJK characters whose Mandarin readings (toneless pinyin, from ``pypinyin``) are close to the
name's, syllable by syllable:

* each syllable starts with the same letter, retroflex initials folded (zh/ch/sh as z/c/s: "是" shi
  for "斯" si), and is at most two letters from the name's ("蔣" jiang for "贾" jia);
* the whole reading is at most one letter off per syllable after the first (two for three syllables).

This is the same judgement as the Latin rule (a name's vowels are often misheard, its first sound
rarely), made on sounds, so homophones match: 家维斯 is 贾维斯 to an ear too. A vocative before it
("嘿", "喂", "你好") must read exactly the same (:func:`same_sound`: "黑" for "嘿"). Without ``pypinyin`` (the
``multilingual`` extra) a CJK name matches its characters exactly, as before.
"""

from __future__ import annotations

import functools
import importlib.util

from openab_voice.providers.scripts import is_cjk

__all__ = ["same_sound", "sounds_like"]

_RETROFLEX = (("zh", "z"), ("ch", "c"), ("sh", "s"))


@functools.cache
def _has_pinyin() -> bool:
    return importlib.util.find_spec("pypinyin") is not None


@functools.lru_cache(maxsize=1024)
def _reading(text: str) -> tuple[str, ...]:
    from pypinyin import Style, lazy_pinyin  # noqa: PLC0415 (the multilingual extra)

    syllables = []
    for syllable in lazy_pinyin(text, style=Style.NORMAL, errors="ignore"):
        for retroflex, plain in _RETROFLEX:
            if syllable.startswith(retroflex):
                syllable = plain + syllable[len(retroflex) :]
        syllables.append(syllable)
    return tuple(syllables)


def sounds_like(heard: str, name: str) -> bool:
    """True when ``heard`` (CJK characters, as many as ``name`` has) reads as the CJK ``name``.

    >>> sounds_like("蔣維斯", "贾维斯"), sounds_like("假为是", "贾维斯"), sounds_like("觉得是", "贾维斯")
    (True, True, False)
    """
    if heard == name:
        return True
    if len(heard) != len(name) or not all(map(is_cjk, heard)) or not _has_pinyin():
        return False
    said, wanted = _reading(heard), _reading(name)
    if len(said) != len(wanted) or not wanted:
        return False
    if any(a[:1] != b[:1] or _distance(a, b) > 2 for a, b in zip(said, wanted, strict=True)):
        return False
    return _distance("".join(said), "".join(wanted)) <= max(1, len(wanted) - 1)


def same_sound(heard: str, word: str) -> bool:
    """True when the CJK ``heard`` reads exactly as the CJK ``word`` (a short word such as the vocative
    "嘿", where any letter off is another word): "黑" (hei) for "嘿"."""
    if heard == word:
        return True
    if not heard or len(heard) != len(word) or not all(map(is_cjk, heard + word)) or not _has_pinyin():
        return False
    return _reading(heard) == _reading(word)


def _distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
