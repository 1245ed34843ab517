"""Bounded, timestamped ring buffers for capture and render reference frames.

The writer is the audio side (discord.py's reader thread via the receiver, or the player thread for
the render reference) and must never wait: :meth:`FrameRing.push` takes a lock held only for a deque
operation, and when the ring is full it drops the oldest frames that no reader holds yet (frames
already popped belong to the reader and are never touched). Each overflow episode is reported as an
:class:`~openab_voice.audio.events.AudioBufferOverrun`, at most once per ``report_interval_s`` so a
stalled consumer cannot flood the bus.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from openab_voice.audio.events import AudioBufferOverrun
from openab_voice.audio.frame import AudioFrame
from openab_voice.bus.events import Event
from openab_voice.clock import Clock

Emit = Callable[[Event], None]


class FrameRing:
    """A bounded FIFO of :class:`AudioFrame` in timestamp order.

    Args:
        name: ring name in events (``"capture"``, ``"render"`` ...).
        capacity: most frames held; a push beyond it drops the oldest.
        clock: the injected clock (paces overrun reports).
        emit: receives overrun events; must be safe to call from the writer's thread.
        speaker_id: whose ring this is (None for the shared render reference).
        report_interval_s: minimum spacing of overrun events.
    """

    def __init__(
        self,
        name: str,
        capacity: int,
        *,
        clock: Clock,
        emit: Emit,
        speaker_id: str | None = None,
        report_interval_s: float = 1.0,
    ) -> None:
        if capacity < 1:
            raise ValueError("ring capacity must be at least 1")
        self.name = name
        self.capacity = capacity
        self.speaker_id = speaker_id
        self._frames: collections.deque[AudioFrame] = collections.deque()
        self._lock = threading.Lock()
        self._clock = clock
        self._emit = emit
        self._interval = report_interval_s
        self._last_report: float | None = None
        self._unreported = 0
        self._last_timestamp: float | None = None
        self._last_frame_id: int | None = None
        self.pushed_total = 0
        self.dropped_total = 0
        self.out_of_order_total = 0

    def push(self, frame: AudioFrame) -> bool:
        """Append ``frame`` without blocking; returns False if it was rejected as out of order.

        A frame older than the newest one already written (timestamp or frame id going backwards)
        would break the alignment every later stage relies on, so it is counted and dropped.
        """
        dropped = 0
        with self._lock:
            if (self._last_timestamp is not None and frame.timestamp < self._last_timestamp) or (
                self._last_frame_id is not None and frame.frame_id <= self._last_frame_id
            ):
                self.out_of_order_total += 1
                return False
            self._last_timestamp = frame.timestamp
            self._last_frame_id = frame.frame_id
            self._frames.append(frame)
            self.pushed_total += 1
            while len(self._frames) > self.capacity:
                self._frames.popleft()
                dropped += 1
            self.dropped_total += dropped
            self._unreported += dropped
            event = self._take_report() if dropped else None
        if event is not None:
            self._emit(event)
        return True

    def pop(self) -> AudioFrame | None:
        """The oldest frame, or None when empty."""
        with self._lock:
            return self._frames.popleft() if self._frames else None

    def drain(self) -> list[AudioFrame]:
        """Every queued frame, oldest first, leaving the ring empty."""
        with self._lock:
            frames = list(self._frames)
            self._frames.clear()
        return frames

    def clear(self) -> None:
        """Forget queued frames (not counted as overruns) and the ordering history."""
        with self._lock:
            self._frames.clear()
            self._last_timestamp = None
            self._last_frame_id = None

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def duration(self) -> float:
        """Seconds of audio queued."""
        with self._lock:
            return sum(f.duration for f in self._frames)

    def poll(self) -> None:
        """Report drops still unreported once the report interval has passed (call periodically)."""
        with self._lock:
            event = self._take_report() if self._unreported else None
        if event is not None:
            self._emit(event)

    def _take_report(self) -> AudioBufferOverrun | None:
        # Called with the lock held; the caller emits outside it so a slow subscriber never holds
        # up the writer.
        now = self._clock.monotonic()
        if self._last_report is not None and now - self._last_report < self._interval:
            return None
        dropped, self._unreported = self._unreported, 0
        self._last_report = now
        return AudioBufferOverrun(
            at=now,
            ring=self.name,
            speaker_id=self.speaker_id,
            capacity=self.capacity,
            dropped=dropped,
            dropped_total=self.dropped_total,
        )
