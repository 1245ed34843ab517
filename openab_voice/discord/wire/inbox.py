"""The one queue through which receive work leaves discord.py's socket reader thread.

discord.py calls socket listeners in its ``SocketReader`` thread (``voice_state.py``); anything slow
there delays every other listener and the socket itself, and a lock shared with the event loop is
how the proof of concept reordered packets (notes §4, "threading pitfall"). So the reader only
appends here, and one worker thread takes everything out in order.

Two kinds of item share one FIFO so that their relative order is kept: *packets* are bounded (when
the bound is reached the newest packet is refused and counted, and the reader never blocks),
*control* messages (SSRC mapping, user removal, key changes, ticks) are never refused, because
losing one would corrupt state that later packets depend on.
"""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

from openab_voice.lifecycle import Lifecycle

T = TypeVar("T")


class Inbox(Generic[T]):
    """A bounded multi-producer, single-consumer FIFO.

    Args:
        max_packets: how many droppable items may wait at once.
    """

    def __init__(self, max_packets: int) -> None:
        if max_packets < 1:
            raise ValueError("max_packets must be positive")
        self._max_packets = max_packets
        self._items: collections.deque[tuple[bool, T]] = collections.deque()
        self._packets = 0
        self._refused = 0
        self._life = Lifecycle("inbox", started=True)
        self._ready = threading.Condition(threading.Lock())

    @property
    def refused(self) -> int:
        """Packets refused because the inbox was full (cumulative)."""
        return self._refused

    @property
    def closed(self) -> bool:
        return self._life.closed

    def offer(self, item: T) -> bool:
        """Enqueue a droppable packet; never blocks.

        Returns:
            False when it was refused (inbox full or closed).
        """
        with self._ready:
            if self._life.closed:
                return False
            if self._packets >= self._max_packets:
                self._refused += 1
                return False
            self._items.append((True, item))
            self._packets += 1
            # Only the transition from empty needs a wake-up: the consumer drains everything.
            if len(self._items) == 1:
                self._ready.notify()
            return True

    def put(self, item: T) -> None:
        """Enqueue a control message; never refused while open, kept in order with packets."""
        with self._ready:
            if self._life.closed:
                return
            self._items.append((False, item))
            if len(self._items) == 1:
                self._ready.notify()

    def take_all(self, timeout: float | None = None) -> list[T]:
        """Wait until something is queued (or ``timeout`` seconds, or close), then take everything.

        Returns:
            The items in arrival order; empty after a timeout or once closed and drained.
        """
        with self._ready:
            if not self._items and not self._life.closed:
                self._ready.wait(timeout)
            items = self._items
            self._items = collections.deque()
            self._packets = 0
        return [item for _, item in items]

    def close(self) -> None:
        """Refuse everything from now on and wake the consumer; queued items can still be taken."""
        with self._ready:
            self._life.close_now()
            self._ready.notify_all()
