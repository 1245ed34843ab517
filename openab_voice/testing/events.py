"""One event log for tests and self-tests: every bus event in order, with expect-style checks.

``log = EventLog(bus)`` subscribes to everything published on ``bus``. A check that fails raises
``AssertionError`` listing the events seen, so a failing test says what happened instead::

    log.expect(TurnAccepted, turn_id="turn-1")
    log.expect_order(TurnAccepted, match(DialogueStateChanged, state="speaking"), BotUtteranceFinished)
    log.expect_none(ErrorRaised)
    await log.wait_for(BotUtteranceFinished, clock=clock, limit_s=5)

``since`` (an index from :meth:`EventLog.mark`) limits a check to the events published after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, overload

from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import Clock, bounded
from openab_voice.engine.events import DialogueStateChanged
from openab_voice.testing.virtual_time import VirtualClock

__all__ = ["EventLog", "Step", "match"]

E = TypeVar("E", bound=Event)
Step = type[Event] | Callable[[Event], bool]
_SHOWN = 40  # events listed in a failure message (the latest ones)


def match(kind: type[Event], **fields: Any) -> Callable[[Event], bool]:
    """A predicate: an event of ``kind`` whose attributes equal ``fields``."""

    def matches(event: Event) -> bool:
        return isinstance(event, kind) and all(getattr(event, k, _MISSING) == v for k, v in fields.items())

    matches.__qualname__ = _describe(kind, fields)
    return matches


class EventLog:
    """The events published on a bus, in order. ``close()`` unsubscribes."""

    def __init__(self, bus: EventBus, kind: type[Event] = Event) -> None:
        self.events: list[Event] = []
        self._subscription = bus.subscribe(kind, self._record)
        self._listeners: list[Callable[[], None]] = []

    def close(self) -> None:
        self._subscription.close()

    def _record(self, event: Event) -> None:
        self.events.append(event)
        for wake in tuple(self._listeners):
            wake()

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return self.events[index]

    def mark(self) -> int:
        """The index the next event will have: pass it as ``since`` to check only what follows."""
        return len(self.events)

    # --- queries --------------------------------------------------------------------------------

    def of(self, kind: type[E], *, since: int = 0) -> list[E]:
        return [e for e in self.events[since:] if isinstance(e, kind)]

    def matching(self, kind: type[E], *, since: int = 0, **fields: Any) -> list[E]:
        """Events of ``kind`` whose attributes equal ``fields``."""
        wanted = match(kind, **fields)
        return [e for e in self.of(kind, since=since) if wanted(e)]

    def last(self, kind: type[E], *, since: int = 0, **fields: Any) -> E | None:
        """The latest event of ``kind`` matching ``fields``, or None."""
        found = self.matching(kind, since=since, **fields)
        return found[-1] if found else None

    def transitions(self, *, since: int = 0) -> list[str]:
        """The dialogue's state changes, as ``previous->state``."""
        return [f"{e.previous}->{e.state}" for e in self.of(DialogueStateChanged, since=since)]

    def in_order(self, *steps: Step, since: int = 0) -> bool:
        """True when events matching ``steps`` occur in this order (as a subsequence)."""
        predicates = [_predicate(step) for step in steps]
        i = 0
        for event in self.events[since:]:
            if i < len(predicates) and predicates[i](event):
                i += 1
        return i == len(predicates)

    # --- expectations ---------------------------------------------------------------------------

    def expect(self, kind: type[E], *, since: int = 0, **fields: Any) -> E:
        """The first event of ``kind`` matching ``fields``; fails listing the events seen if none."""
        found = self.matching(kind, since=since, **fields)
        if not found:
            raise AssertionError(f"expected {_describe(kind, fields)}; {self.describe(since)}")
        return found[0]

    def expect_none(self, kind: type[Event], *, since: int = 0, **fields: Any) -> None:
        """Fail, listing them, if any event of ``kind`` matches ``fields``."""
        found = self.matching(kind, since=since, **fields)
        if found:
            raise AssertionError(
                f"expected no {_describe(kind, fields)}, got {found}; {self.describe(since)}"
            )

    def expect_order(self, *steps: Step, since: int = 0) -> None:
        """Fail unless events matching ``steps`` occur in this order (others may come between)."""
        if not self.in_order(*steps, since=since):
            wanted = " -> ".join(_name(step) for step in steps)
            raise AssertionError(f"expected in order {wanted}; {self.describe(since)}")

    async def wait_for(
        self,
        kind: type[E],
        predicate: Callable[[E], bool] | None = None,
        *,
        clock: Clock,
        limit_s: float = 30.0,
        count: int = 1,
    ) -> list[E]:
        """Wait until ``count`` events of ``kind`` (matching ``predicate``) were published.

        On a :class:`~openab_voice.testing.virtual_time.VirtualClock` virtual time is run until
        then; on any other clock the wait is woken by each event, bounded by ``limit_s`` on it.

        Returns:
            Every matching event so far.

        Raises:
            AssertionError: not within ``limit_s``; lists the events seen.
        """

        def found() -> list[E]:
            return [e for e in self.of(kind) if predicate is None or predicate(e)]

        if isinstance(clock, VirtualClock):
            await clock.run_until(lambda: len(found()) >= count, limit_s=limit_s)
        else:
            await self._wait_real(clock, limit_s, lambda: len(found()) >= count)
        result = found()
        if len(result) < count:
            raise AssertionError(
                f"{count} x {kind.__name__} not within {limit_s:g} s (saw {len(result)}); {self.describe()}"
            )
        return result

    async def _wait_real(self, clock: Clock, limit_s: float, done: Callable[[], bool]) -> None:
        changed = asyncio.Event()
        self._listeners.append(changed.set)
        try:
            deadline = clock.monotonic() + limit_s
            while not done() and (remaining := deadline - clock.monotonic()) > 0:
                changed.clear()
                await bounded(clock, remaining, changed.wait())
        finally:
            self._listeners.remove(changed.set)

    def describe(self, since: int = 0) -> str:
        """The events seen (the latest ``_SHOWN``), one per line, for a failure message."""
        seen = self.events[since:]
        lines = [f"  {since + i}: {e!r}" for i, e in enumerate(seen)][-_SHOWN:]
        more = f" ({len(seen) - _SHOWN} earlier not shown)" if len(seen) > _SHOWN else ""
        return f"{len(seen)} events seen{more}:\n" + "\n".join(lines)


_MISSING = object()


def _describe(kind: type[Event], fields: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
    return f"{kind.__name__}({args})" if args else kind.__name__


def _predicate(step: Step) -> Callable[[Event], bool]:
    if isinstance(step, type):
        kind = step
        return lambda e: isinstance(e, kind)
    return step


def _name(step: Step) -> str:
    return step.__name__ if isinstance(step, type) else getattr(step, "__qualname__", repr(step))
