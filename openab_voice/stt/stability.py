"""The stability filter for streaming partial transcripts: which words of a growing hypothesis are
settled enough to act on (agreement between successive decodes)."""

from __future__ import annotations

import collections
import re

_WORD = re.compile(r"[^\w']+|(?<!\w)'|'(?!\w)")


def normalize_words(text: str) -> list[str]:
    """Lowercase words without punctuation: what hypotheses are compared on."""
    return _WORD.sub(" ", text.lower()).split()


class StabilityFilter:
    """Longest common word prefix of the last ``agreement`` hypotheses; grows, never retracts."""

    def __init__(self, agreement: int) -> None:
        self._history: collections.deque[list[tuple[str, str]]] = collections.deque(maxlen=agreement)
        self._stable: list[tuple[str, str]] = []

    @property
    def text(self) -> str:
        """The stable prefix, spelt as in the latest hypothesis that extended it."""
        return " ".join(raw for _, raw in self._stable)

    def update(self, hypothesis: str) -> bool:
        """Add a hypothesis; True when the stable prefix grew."""
        words = [
            (norm, raw) for raw in hypothesis.split() for norm in [" ".join(normalize_words(raw))] if norm
        ]
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
