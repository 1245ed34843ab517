"""The in-process event bus.

Publishing happens on the event loop thread; other threads (discord.py's reader and player
threads, the receive worker) use :meth:`EventBus.publish_threadsafe`. Handlers are called
synchronously in publish order; a handler that raises is logged and skipped, never allowed to
break the publisher. Async consumers use bounded :class:`EventStream`s that drop the oldest
event on overflow and count what they dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from openab_voice.bus.events import Event
from openab_voice.lifecycle import Lifecycle

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)


class Subscription:
    """Handle returned by :meth:`EventBus.subscribe`; ``close()`` unsubscribes (idempotent)."""

    def __init__(self, bus: EventBus, event_type: type[Event], handler: Callable[[Any], None]) -> None:
        self._bus = bus
        self._event_type = event_type
        self._handler = handler

    def close(self) -> None:
        self._bus._remove(self._event_type, self._handler)


class EventStream:
    """A bounded async iterator over events of one type (and its subclasses)."""

    def __init__(self, maxsize: int) -> None:
        self._items: collections.deque[Event] = collections.deque(maxlen=maxsize)
        self._ready = asyncio.Event()
        self._life = Lifecycle("event stream", started=True)
        self.dropped = 0
        self.subscription: Subscription | None = None

    def _push(self, event: Event) -> None:
        if self._items.maxlen is not None and len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(event)
        self._ready.set()

    def close(self) -> None:
        self._life.close_now()
        if self.subscription is not None:
            self.subscription.close()
        self._ready.set()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        while not self._items:
            if self._life.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class EventBus:
    """Type-keyed publish/subscribe. A subscriber to ``Event`` receives everything."""

    def __init__(self) -> None:
        self._handlers: dict[type[Event], list[Callable[[Any], None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the loop that :meth:`publish_threadsafe` hands events to."""
        self._loop = loop

    def subscribe(self, event_type: type[E], handler: Callable[[E], None]) -> Subscription:
        self._handlers.setdefault(event_type, []).append(handler)
        return Subscription(self, event_type, handler)

    def stream(self, event_type: type[Event] = Event, *, maxsize: int = 10_000) -> EventStream:
        s = EventStream(maxsize)
        s.subscription = self.subscribe(event_type, s._push)
        return s

    def _remove(self, event_type: type[Event], handler: Callable[[Any], None]) -> None:
        handlers = self._handlers.get(event_type, [])
        if handler in handlers:
            handlers.remove(handler)

    def publish(self, event: Event) -> None:
        for cls in type(event).__mro__:
            for handler in tuple(self._handlers.get(cls, ())):
                try:
                    handler(event)
                except Exception:
                    log.exception("event handler failed for %s", type(event).__name__)
            if cls is Event:
                break

    def publish_threadsafe(self, event: Event) -> None:
        """Publish from a non-loop thread. Drops silently if no loop is bound or it is closed."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # loop closed between the check and the call
            loop.call_soon_threadsafe(self.publish, event)
