"""The stability filter for streaming partial transcripts: which words of a growing hypothesis are
settled enough to act on (agreement between successive decodes).

Chinese and Japanese write no spaces, so there a word is one CJK character: "今天天气" then
"今天天气很好" agree on four units, where as one space-less word each they would agree on none.
Mixed text counts each CJK character and each run of other letters (:mod:`openab_voice.providers.scripts`).
"""

from __future__ import annotations

import collections
import re

from openab_voice.providers.scripts import has_cjk, is_cjk, split_units

_WORD = re.compile(r"[^\w']+|(?<!\w)'|'(?!\w)")


def normalize_words(text: str) -> list[str]:
    """Lowercase words without punctuation: what hypotheses are compared on (a CJK character is a word)."""
    words = _WORD.sub(" ", text.lower()).split()
    if not has_cjk(text):
        return words
    return [unit for word in words for unit in split_units(word)]


def _units(token: str) -> list[tuple[str, str]]:
    """A whitespace-free ``token`` as (normalized, spelt) units; punctuation goes with the unit it
    touches, and a unit that is only punctuation is dropped."""
    if not has_cjk(token):
        norm = " ".join(normalize_words(token))
        return [(norm, token)] if norm else []
    units: list[tuple[str, str]] = []
    lead = ""  # punctuation before the first unit ("“你好")
    for piece in split_units(token):
        norm = piece if is_cjk(piece) else " ".join(normalize_words(piece))
        if norm:
            units.append((norm, lead + piece))
            lead = ""
        elif units:
            units[-1] = (units[-1][0], units[-1][1] + piece)
        else:
            lead += piece
    return units


class StabilityFilter:
    """Longest common word prefix of the last ``agreement`` hypotheses; grows, never retracts."""

    def __init__(self, agreement: int) -> None:
        self._history: collections.deque[list[tuple[str, str]]] = collections.deque(maxlen=agreement)
        # (normalized, spelling with the space before it, if the hypothesis had one)
        self._stable: list[tuple[str, str]] = []

    @property
    def text(self) -> str:
        """The stable prefix, spelt as in the latest hypothesis that extended it."""
        return "".join(raw for _, raw in self._stable).lstrip(" ")

    def update(self, hypothesis: str) -> bool:
        """Add a hypothesis; True when the stable prefix grew."""
        words: list[tuple[str, str]] = []
        for token in hypothesis.split():
            for i, (norm, raw) in enumerate(_units(token)):
                words.append((norm, " " + raw if i == 0 else raw))
        self._history.append(words)
        if len(self._history) < (self._history.maxlen or 0):
            return False
        common = 0
        shortest = min(len(h) for h in self._history)
        while common < shortest and len({h[common][0] for h in self._history}) == 1:
            common += 1
        stable = len(self._stable)
        # Only an extension of what is already stable counts: a disagreement inside the stable
        # prefix waits for the final instead of retracting words a listener may have acted on.
        if common <= stable or any(self._stable[i][0] != words[i][0] for i in range(stable)):
            return False
        # Same words, latest spelling: "ago." mid-sentence becomes "ago" once the sentence goes on.
        self._stable = words[:common]
        return True
