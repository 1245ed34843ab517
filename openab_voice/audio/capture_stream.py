"""Where processed capture goes: bounded streams, speech marks in band, the speech sinks, the bus.

:class:`ProcessedCaptureStream` is what :meth:`~openab_voice.audio.frontend.FrontEnd.subscribe` and
:meth:`~openab_voice.audio.frontend.FrontEnd.subscribe_marked` return: a bounded async iterator.
Items are delivered on the event loop thread; a consumer that falls behind loses the oldest frames
(reported as ``audio_buffer_overrun`` with ``ring="processed"``) rather than stalling the front end.
A marked stream also carries the speech marks (:data:`SpeechMark`: ``SpeechStarted``,
``SpeechEnded``, ``CapturePaused``) in band, in the order the pipeline produced them among the frames,
so a consumer (the transcriber) never reconciles a speech end that raced the frames before it. Marks
are never dropped and do not count against ``maxsize``.

:class:`CaptureDelivery` hands one batch out on the event loop: its items to the streams, then its
events, each speech event first to the speech sinks (the conversation's barge-in path: a direct
call in the same loop callback as the batch's frames, no queue hop), then to the bus for observers.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from openab_voice.audio.events import AudioBufferOverrun, CapturePaused, SpeechEnded, SpeechStarted
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import Clock
from openab_voice.lifecycle import Lifecycle

__all__ = ["CaptureDelivery", "CaptureItem", "ProcessedCaptureStream", "SpeechMark", "SpeechSink"]

log = logging.getLogger(__name__)

SpeechMark = SpeechStarted | SpeechEnded | CapturePaused
CaptureItem = ProcessedFrame | SpeechMark
SpeechSink = Callable[[SpeechStarted | SpeechEnded], None]
"""A direct consumer of speech boundaries (the conversation's ``hear``), called on the event loop."""

ItemT = TypeVar("ItemT", ProcessedFrame, CaptureItem)


class ProcessedCaptureStream(Generic[ItemT]):
    """Processed frames of one speaker (or of all speakers when ``speaker_id`` is None), with the
    speech marks in band when ``marks`` is set.

    Use ``async for item in stream`` (ends after :meth:`close`) or :meth:`get_nowait`.
    """

    def __init__(
        self,
        *,
        speaker_id: str | None,
        maxsize: int,
        clock: Clock,
        emit: Callable[[Event], None],
        on_close: Callable[[ProcessedCaptureStream[Any]], None],
        marks: bool = False,
    ) -> None:
        self.speaker_id = speaker_id
        self.maxsize = maxsize
        self.marks = marks
        self._items: collections.deque[ItemT] = collections.deque()
        self._frames = 0  # frames queued (what maxsize bounds); marks come on top
        self._ready = asyncio.Event()
        self._life = Lifecycle("capture stream", started=True)
        self._clock = clock
        self._emit = emit
        self._on_close = on_close
        self.dropped = 0

    def wants(self, item: CaptureItem) -> bool:
        """Whether this subscription takes ``item``."""
        if self._life.closed:
            return False
        if isinstance(item, ProcessedFrame):
            return self.speaker_id is None or item.frame.speaker_id == self.speaker_id
        return self.marks and (self.speaker_id is None or item.speaker_id == self.speaker_id)

    def push(self, item: ItemT) -> None:
        """Deliver one item (event loop thread only); drops the oldest frame when full."""
        self._items.append(item)
        if isinstance(item, ProcessedFrame):
            self._frames += 1
            if self._frames > self.maxsize:
                self._drop_oldest_frame()
        self._ready.set()

    def _drop_oldest_frame(self) -> None:
        for index, queued in enumerate(self._items):
            if isinstance(queued, ProcessedFrame):
                del self._items[index]
                break
        self._frames -= 1
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

    def get_nowait(self) -> ItemT | None:
        """The oldest undelivered item, or None."""
        return self._take() if self._items else None

    def _take(self) -> ItemT:
        item = self._items.popleft()
        if isinstance(item, ProcessedFrame):
            self._frames -= 1
        return item

    def __len__(self) -> int:
        """Frames queued (the bounded part; marks are not counted)."""
        return self._frames

    def close(self) -> None:
        """Stop the subscription; iteration ends once queued items are consumed (idempotent)."""
        if not self._life.close_now():
            return
        self._ready.set()
        self._on_close(self)

    def __aiter__(self) -> ProcessedCaptureStream[ItemT]:
        return self

    async def __anext__(self) -> ItemT:
        while not self._items:
            if self._life.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._take()


class CaptureDelivery:
    """The streams and speech sinks of one front end, and its way to the bus (event loop thread).

    Args:
        bus: where every event goes, for observers.
        session_id: stamped on every event that has none.
    """

    def __init__(self, *, bus: EventBus, session_id: str | None) -> None:
        self._bus = bus
        self._session = session_id
        self.streams: list[ProcessedCaptureStream[Any]] = []
        self._sinks: list[SpeechSink] = []

    def add_stream(self, stream: ProcessedCaptureStream[Any]) -> None:
        self.streams.append(stream)

    def remove_stream(self, stream: ProcessedCaptureStream[Any]) -> None:
        self.streams.remove(stream)

    def add_speech_sink(self, sink: SpeechSink) -> None:
        self._sinks.append(sink)

    def items(self, items: list[CaptureItem]) -> None:
        """Hand a batch's frames and marks, in order, to every stream that wants them."""
        for item in items:
            for stream in tuple(self.streams):
                if stream.wants(item):
                    stream.push(item)

    def event(self, event: Event) -> None:
        """A speech event to the speech sinks first (a failing sink is logged and skipped), then
        any event to the bus, stamped with the session."""
        if self._session is not None and event.session_id is None:
            event = dataclasses.replace(event, session_id=self._session)
        if isinstance(event, SpeechStarted | SpeechEnded):
            for sink in tuple(self._sinks):
                try:
                    sink(event)
                except Exception:  # one consumer's bug must not stop the others or the front end
                    log.exception("speech sink failed for %s", type(event).__name__)
        self._bus.publish(event)
