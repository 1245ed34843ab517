"""Where Piper's first synthesis unit of a sentence ends, and how its audio joins the rest.

Piper (VITS) turns a whole phoneme sequence into audio in one onnxruntime run, so a sentence's first
audio waits for all of it: about 10 ms per word plus a fixed cost, 170/200 ms P50/P95 for a typical
first sentence of a model's answer idle, 260/370 ms with one core busy. The sentence's phonemes are
therefore synthesized in two units: its first ``words`` words (or up to an earlier clause mark, where
speech pauses anyway), then the rest while the first plays. Each unit is a complete utterance to the
model, which ends the first with a pause of 150-200 ms and starts the second after 50-60 ms of quiet.
At a clause mark that is about the voice's own pause there (300-450 ms inside a whole sentence) and
stays; a cut inside a phrase keeps only :data:`JOIN_QUIET_MS` of each so the words run on, and the
cut falls in quiet audio (no click). Pure: no I/O, no clock. Measurements: docs/adr/0020-tts-first-chunk.md.

Chinese has no spaces between words, so a Chinese voice's phonemes are counted in characters. Piper's
pinyin voices (``phoneme_type`` ``pinyin``) give each character as initial, final and tone digit
(``"h" "ao" "3"``) and keep the full-width marks (``，、；：``): there the same rule counts syllables,
a word being :data:`~openab_voice.providers.scripts.CJK_CHARS_PER_WORD` characters (4 words: 6
characters, :func:`~openab_voice.providers.scripts.chars_for_words`), and cuts between syllables.
An espeak ``cmn`` voice writes spaces between the words it finds, so it keeps the word rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from openab_voice.providers.scripts import CJK_CLAUSE_MARKS, chars_for_words

__all__ = [
    "JOIN_QUIET_MS",
    "MIN_REST_WORDS",
    "Split",
    "full_scale_gain",
    "quiet_edges",
    "rest_gain",
    "split_first_unit",
    "trim_head",
    "trim_tail",
]

MIN_REST_WORDS: Final = 4
"""A sentence is split only when at least this many words follow the first unit. A short sentence is
quick to synthesize whole (about 100 ms idle for 7 words), and cut it heard worse: "What is the capital
| of France?" came back from the transcriber as "What is the capital? A France?"."""

JOIN_QUIET_MS: Final = 20
"""Quiet kept on each side of a cut inside a phrase (about a word boundary's own gap in running speech)."""


_CLAUSE_MARKS: Final = frozenset(",;:")
_TONES: Final = frozenset("12345")
# Piper's pinyin symbols: initials and finals in ASCII letters, "Ø" (no initial), tone digits, marks.
_PINYIN_SYMBOL: Final = re.compile(
    r"[a-zØ]+|[1-5]|[ ,.;:!?\u2014\u2026\u3002\uff1f\uff01\uff0c\u3001\uff1a\uff1b]"
)
_PINYIN_CLAUSE_MARKS: Final = _CLAUSE_MARKS | frozenset(CJK_CLAUSE_MARKS)
_QUIET: Final = 0.01  # -40 dBFS: below it a 5 ms window counts as quiet
_WINDOW_MS: Final = 5
_SILENT: Final = 1e-8  # Piper's own floor: a quieter peak is silence, not normalized


@dataclass(frozen=True, slots=True)
class Split:
    """A sentence's phonemes in two units.

    Attributes:
        first: the first unit's phonemes (ending with its clause mark when ``at_clause``).
        rest: the remaining phonemes.
        at_clause: the cut follows a clause mark (the speaker pauses there: the model's pause stays).
    """

    first: list[str]
    rest: list[str]
    at_clause: bool


def split_first_unit(phonemes: Sequence[str], words: int) -> Split | None:
    """Cut ``phonemes`` (one sentence, espeak's, words separated by ``" "``) after its first unit.

    The first unit ends at the first clause mark (``,`` ``;`` ``:``) after its second to its
    ``words`` + 1-th word, else after ``words`` words. None when ``words`` is 0 (off) or fewer than
    :data:`MIN_REST_WORDS` words would follow.
    """
    if words < 1:
        return None
    if _is_pinyin(phonemes):
        return _split_syllables(phonemes, words)
    spaces = [i for i, p in enumerate(phonemes) if p == " " and 0 < i < len(phonemes) - 1]
    # A cut at the n-th space (1-based) leaves len(spaces) + 1 - n words: n may go up to ``last``.
    last = len(spaces) + 1 - MIN_REST_WORDS
    # Never a lone word before a clause mark: "Jarvis," synthesized alone came back from the
    # transcriber as "service,".
    for space in spaces[1 : min(words + 1, last)]:
        if phonemes[space - 1] in _CLAUSE_MARKS:
            return Split(first=list(phonemes[:space]), rest=list(phonemes[space + 1 :]), at_clause=True)
    if words > last:
        return None
    cut = spaces[words - 1]
    return Split(first=list(phonemes[:cut]), rest=list(phonemes[cut + 1 :]), at_clause=False)


def _is_pinyin(phonemes: Sequence[str]) -> bool:
    """True for a pinyin voice's phonemes: pinyin symbols only, with tones (espeak's carry IPA)."""
    return any(p in _TONES for p in phonemes) and all(_PINYIN_SYMBOL.fullmatch(p) for p in phonemes)


def _split_syllables(phonemes: Sequence[str], words: int) -> Split | None:
    """:func:`split_first_unit` for pinyin, in characters (each ends at its tone digit).

    The rule in words, each count turned into characters by ``chars_for_words``; with ``words`` 4:
    the first unit ends at the first clause mark after its 3rd (2 words: never a lone word) to its
    8th character (``words`` + 1), else after its 6th (``words``), and only when 6 or more follow
    (:data:`MIN_REST_WORDS`). The marks after a syllable stay with it.
    """
    # ends[k]: the index just past the k+1-th syllable and any marks or spaces right after it.
    ends: list[int] = []
    for i, p in enumerate(phonemes):
        if p in _TONES:
            ends.append(i + 1)
        elif ends and ends[-1] == i and not p.isalpha():
            ends[-1] = i + 1
    last = len(ends) - chars_for_words(MIN_REST_WORDS)  # the most syllables the first unit may take
    for count in range(chars_for_words(2), min(chars_for_words(words + 1), last) + 1):
        end = ends[count - 1]
        if any(p in _PINYIN_CLAUSE_MARKS for p in phonemes[ends[count - 2] : end]):
            return _syllable_split(phonemes, end, at_clause=True)
    count = chars_for_words(words)
    if count > last:
        return None
    return _syllable_split(phonemes, ends[count - 1], at_clause=False)


def _syllable_split(phonemes: Sequence[str], end: int, *, at_clause: bool) -> Split:
    first = list(phonemes[:end])
    while first and first[-1] == " ":
        first.pop()
    rest = list(phonemes[end:])
    return Split(first=first, rest=rest, at_clause=at_clause)


def quiet_edges(audio: npt.NDArray[np.float32], rate: int) -> tuple[int, int]:
    """Samples of quiet at the start and at the end of ``audio`` (in whole 5 ms windows)."""
    window = max(1, rate * _WINDOW_MS // 1000)
    count = len(audio) // window
    if count == 0:
        return 0, 0
    frames = np.asarray(audio[: count * window], dtype=np.float64).reshape(count, window)
    loud = np.flatnonzero(np.sqrt(np.mean(frames**2, axis=1)) > _QUIET)
    if loud.size == 0:
        return len(audio), len(audio)
    return int(loud[0]) * window, len(audio) - (int(loud[-1]) + 1) * window


def trim_tail(audio: npt.NDArray[np.float32], rate: int) -> npt.NDArray[np.float32]:
    """``audio`` with its trailing quiet cut to :data:`JOIN_QUIET_MS`."""
    _, tail = quiet_edges(audio, rate)
    return audio[: len(audio) - max(0, tail - rate * JOIN_QUIET_MS // 1000)]


def trim_head(audio: npt.NDArray[np.float32], rate: int) -> npt.NDArray[np.float32]:
    """``audio`` with its leading quiet cut to :data:`JOIN_QUIET_MS`."""
    lead, _ = quiet_edges(audio, rate)
    return audio[max(0, lead - rate * JOIN_QUIET_MS // 1000) :]


def full_scale_gain(peak: float) -> float:
    """The gain that brings a unit's ``peak`` to full scale, as Piper normalizes a sentence (0: silence)."""
    return 1.0 / peak if peak > _SILENT else 0.0


def rest_gain(first_gain: float, rest_peak: float) -> float:
    """The rest of a sentence keeps its first unit's gain unless that would clip it.

    Normalized apart, a rest quieter than the words before it would be boosted louder than them.
    """
    own = full_scale_gain(rest_peak)
    return own if first_gain == 0.0 else min(first_gain, own)
