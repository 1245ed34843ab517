"""A subscriber's view of the receiver: every speaker's decoded frames, in order per speaker, as an
async iterator on the event loop, bounded (the oldest frame is dropped and counted when the consumer
falls behind)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from openab_voice.audio.frame import AudioFrame
from openab_voice.lifecycle import Lifecycle

__all__ = ["FrameSubscription"]


class FrameSubscription:
    """Decoded frames of every speaker, in order per speaker; an async iterator on the event loop.

    Bounded: when the consumer falls behind, the oldest frame is dropped and counted in
    :attr:`dropped`. Iteration ends after :meth:`close` (or the receiver's ``aclose``) once the
    frames already queued are consumed.
    """

    def __init__(self, maxsize: int, on_close: Callable[[FrameSubscription], None]) -> None:
        self._frames: collections.deque[AudioFrame] = collections.deque(maxlen=max(1, maxsize))
        self._ready = asyncio.Event()
        self._on_close = on_close
        self._life = Lifecycle("frame subscription", started=True)
        self.dropped = 0

    def deliver(self, frames: list[AudioFrame]) -> None:
        """Queue a batch (the receiver calls this on the event loop); the oldest beyond the bound go."""
        overflow = len(self._frames) + len(frames) - (self._frames.maxlen or 0)
        if overflow > 0:
            self.dropped += overflow
        self._frames.extend(frames)
        self._ready.set()

    def close(self) -> None:
        """Stop receiving frames (idempotent)."""
        if self._life.close_now():
            self._on_close(self)
            self._ready.set()

    def __aiter__(self) -> FrameSubscription:
        return self

    async def __anext__(self) -> AudioFrame:
        while not self._frames:
            if self._life.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._frames.popleft()
