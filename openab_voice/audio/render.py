"""Per-speaker render reference timeline: which render chunk goes with which capture chunk.

The front end resamples the bot's playback once and hands every speaker the same 10 ms chunks
(:meth:`RenderAligner.add`). For each capture chunk the pipeline asks :meth:`RenderAligner.take` for
the render chunk of the same moment, so the APM sees the reference no later than the echo (AEC cannot
cancel what it has not seen yet) and always one render call per capture call.

Within a run (bot speaking, capture continuous) chunks are consumed strictly in sequence so timestamp
jitter never duplicates or skips reference audio; the timestamps only serve to start a run and to
measure skew. When the two clocks disagree (skew beyond the tolerance within a run) the reference is
resynchronised: a lagging one skips ahead (its old chunks are useless to AEC), a leading one is held
back until capture catches up. Both are reported to the :class:`~openab_voice.audio.drift.DriftMonitor`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from openab_voice.audio.drift import DriftMonitor
from openab_voice.audio.resample import Chunk


@dataclass(frozen=True, slots=True)
class RenderTake:
    """The render chunk paired with one capture chunk.

    Attributes:
        chunk: the render chunk, or None when the bot is not playing at that moment.
        skew_s: capture time minus render time of the pairing (None when idle).
    """

    chunk: Chunk | None
    skew_s: float | None


class RenderAligner:
    """Aligns the shared render reference with one speaker's capture.

    Args:
        chunk_s: duration of one chunk (10 ms).
        tolerance_s: largest acceptable |skew| (``drift_tolerance_ms``).
        gap_s: a jump larger than this in either stream's timestamps ends a run.
        history_s: render older than the newest chunk by more than this is forgotten.
        drift: receives skew observations.
    """

    def __init__(
        self, *, chunk_s: float, tolerance_s: float, gap_s: float, history_s: float, drift: DriftMonitor
    ) -> None:
        self._chunk_s = chunk_s
        self._tolerance = tolerance_s
        self._gap = gap_s
        self._history = history_s
        self._drift = drift
        self._chunks: collections.deque[Chunk] = collections.deque()
        self._in_run = False
        self._holding = False
        self._next_render_ts = 0.0
        self._next_capture_ts: float | None = None

    def add(self, chunk: Chunk) -> None:
        """Append a render chunk (called for every speaker with the same chunks)."""
        self._chunks.append(chunk)
        horizon = chunk.timestamp - self._history
        # Expiry, not overrun: a silent speaker sends no capture, so its render simply ages out.
        while self._chunks and self._chunks[0].timestamp < horizon:
            self._chunks.popleft()

    def __len__(self) -> int:
        return len(self._chunks)

    def take(self, capture_ts: float) -> RenderTake:
        """The render chunk for the capture chunk starting at ``capture_ts``."""
        contiguous = (
            self._next_capture_ts is not None and abs(capture_ts - self._next_capture_ts) <= self._gap
        )
        self._next_capture_ts = capture_ts + self._chunk_s
        chunks = self._chunks
        if self._in_run and (
            not contiguous or not chunks or abs(chunks[0].timestamp - self._next_render_ts) > self._gap
        ):
            # A pause in capture (silent speaker) or in render (between utterances) ends the run;
            # the next one starts from timestamps, so neither counts as drift.
            self._in_run = False
            self._holding = False
        if not self._in_run:
            while chunks and chunks[0].timestamp < capture_ts - self._tolerance:
                chunks.popleft()
            if not chunks or chunks[0].timestamp > capture_ts + self._tolerance:
                return RenderTake(None, None)
            self._in_run = True
        skew = capture_ts - chunks[0].timestamp
        self._drift.observe(skew, capture_ts)
        if skew < -self._tolerance:
            self._holding = True
        if self._holding and skew < -self._chunk_s / 2:
            # Reference running ahead of capture: hold it back until capture has caught up fully,
            # so a steady clock mismatch resyncs once per tolerance's worth of drift, not per chunk.
            return RenderTake(None, skew)
        self._holding = False
        chunk = chunks.popleft()
        if skew > self._tolerance:
            # Lagging reference: skip to the chunk nearest the capture time.
            while chunks and chunks[0].timestamp <= capture_ts + self._chunk_s / 2:
                chunk = chunks.popleft()
        self._next_render_ts = chunk.timestamp + self._chunk_s
        return RenderTake(chunk, capture_ts - chunk.timestamp)
