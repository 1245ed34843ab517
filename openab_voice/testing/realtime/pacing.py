"""When each piece of a spoken response leaves the server, and which words go with it.

Audio is sent in ``chunk_ms`` pieces scheduled as it would play: piece ``k`` is due at the audio
origin plus its position divided by the real-time factor. The origin is the first audio's time, no
earlier than ``first_audio_latency_s`` after the ``response.create`` arrived. When synthesis falls
behind (a piece is ready only after it was due) the schedule moves back by the delay: the client
has played everything it got, as a real stream underruns.

Words are spread over their sentence's audio by length (``timed_words``), so a word's transcript
delta goes out with the chunk its audio starts in and a truncation keeps the words that ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openab_voice.testing.realtime.conversation import TimedWord

__all__ = ["Pacer", "Pacing", "split_sentences", "timed_words"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pacing:
    """How audio leaves the server.

    Attributes:
        first_audio_latency_s: earliest first audio delta after the ``response.create`` arrived.
        chunk_ms: audio per ``response.output_audio.delta``.
        realtime_factor: 1 sends audio as fast as it plays, 2 twice as fast, 0 as fast as possible.
    """

    first_audio_latency_s: float = 0.0
    chunk_ms: int = 100
    realtime_factor: float = 1.0


class Pacer:
    """The schedule of one response's audio (times on the server's clock)."""

    def __init__(self, pacing: Pacing, *, started_at: float) -> None:
        self._pacing = pacing
        self._started_at = started_at
        self._origin: float | None = None

    def delay(self, position_ms: float, now: float) -> float:
        """Seconds to wait before sending the audio at ``position_ms`` (0 when it is due or late)."""
        factor = self._pacing.realtime_factor
        if self._origin is None:
            self._origin = max(now, self._started_at + self._pacing.first_audio_latency_s)
        due = self._origin + (position_ms / 1000.0 / factor if factor > 0 else 0.0)
        if due < now:  # an underrun: the listener has played everything sent, the schedule restarts
            self._origin += now - due
            return 0.0
        return due - now


def split_sentences(text: str) -> list[str]:
    """Sentences, each synthesized on its own (so the first audio does not wait for the whole text)."""
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+", text.strip()) if part.strip()]


def timed_words(sentence: str, offset_ms: float, duration_ms: float) -> list[tuple[float, TimedWord]]:
    """``(start_ms, word with its end)`` for each word, spread over the sentence's audio by length."""
    words = sentence.split()
    total = sum(len(w) + 1 for w in words) or 1
    out: list[tuple[float, TimedWord]] = []
    done = 0
    for word in words:
        start = offset_ms + duration_ms * done / total
        done += len(word) + 1
        out.append((start, TimedWord(text=word, end_ms=offset_ms + duration_ms * done / total)))
    return out
