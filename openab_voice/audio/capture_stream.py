"""``ProcessedCaptureStream``: the bounded async iterator STT consumes processed capture from.

Returned by :meth:`~openab_voice.audio.frontend.FrontEnd.subscribe`. Frames are delivered on the
event loop thread; a consumer that falls behind loses the oldest frames (reported as
``audio_buffer_overrun`` with ``ring="processed"``) rather than stalling the front end.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from openab_voice.audio.events import AudioBufferOverrun
from openab_voice.audio.pipeline import ProcessedFrame
from openab_voice.bus.events import Event
from openab_voice.clock import Clock


class ProcessedCaptureStream:
    """Processed frames of one speaker (or of all speakers when ``speaker_id`` is None).

    Use ``async for frame in stream`` (ends after :meth:`close`) or :meth:`get_nowait`.
    """

    def __init__(
        self,
        *,
        speaker_id: str | None,
        maxsize: int,
        clock: Clock,
        emit: Callable[[Event], None],
        on_close: Callable[[ProcessedCaptureStream], None],
    ) -> None:
        self.speaker_id = speaker_id
        self.maxsize = maxsize
        self._items: collections.deque[ProcessedFrame] = collections.deque()
        self._ready = asyncio.Event()
        self._closed = False
        self._clock = clock
        self._emit = emit
        self._on_close = on_close
        self.dropped = 0

    def wants(self, frame: ProcessedFrame) -> bool:
        """Whether this subscription takes ``frame``."""
        return not self._closed and (self.speaker_id is None or frame.frame.speaker_id == self.speaker_id)

    def push(self, frame: ProcessedFrame) -> None:
        """Deliver one frame (event loop thread only); drops the oldest when full."""
        self._items.append(frame)
        if len(self._items) > self.maxsize:
            self._items.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 50 == 0:
                self._emit(
                    AudioBufferOverrun(
                        at=self._clock.monotonic(),
                        ring="processed",
                        speaker_id=self.speaker_id,
                        capacity=self.maxsize,
                        dropped=1 if self.dropped == 1 else 50,
                        dropped_total=self.dropped,
                    )
                )
        self._ready.set()

    def get_nowait(self) -> ProcessedFrame | None:
        """The oldest undelivered frame, or None."""
        return self._items.popleft() if self._items else None

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        """Stop the subscription; iteration ends once queued frames are consumed (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._ready.set()
        self._on_close(self)

    def __aiter__(self) -> ProcessedCaptureStream:
        return self

    async def __anext__(self) -> ProcessedFrame:
        while not self._items:
            if self._closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()
