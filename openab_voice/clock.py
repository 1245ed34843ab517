"""The injected clock: the only module that reads time or sleeps.

Components take a :class:`Clock`; production code passes :class:`SystemClock`, tests pass
:class:`FakeClock` and advance it explicitly. Every wait with a deadline goes through
:func:`first_done`, :func:`bounded` or :func:`wait_for` here: ``asyncio.wait_for``,
``asyncio.timeout`` and ``asyncio.wait(timeout=...)`` read the event loop's own clock, which a fake
clock does not move.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class Clock(Protocol):
    """Monotonic time source plus sleeping."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (arbitrary origin)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch (for timestamps shown to people)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A manually advanced clock for tests: ``sleep`` waits until :meth:`advance` passes its deadline."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._ids = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (self._now + seconds, next(self._ids), fut))
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> None:
        """Set the time to ``when`` (never backwards) and wake every sleeper due by then."""
        self._now = max(self._now, when)
        while self._waiters and self._waiters[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)

    def next_deadline(self) -> float | None:
        """When the earliest sleeper still waiting wakes (None: nobody sleeps)."""
        while self._waiters and self._waiters[0][2].done():  # cancelled sleeps
            heapq.heappop(self._waiters)
        return self._waiters[0][0] if self._waiters else None


async def first_done(clock: Clock, timeout_s: float | None, *futures: asyncio.Future[Any]) -> int | None:
    """Wait until one of ``futures`` is done or ``timeout_s`` passes on ``clock``.

    The futures stay the caller's: none is cancelled here, so a prompt still in flight can be waited
    on again (the cancel grace after a turn timeout, for one).

    Returns:
        The index of the first done future (in argument order), or None on timeout.
    """
    timer = asyncio.ensure_future(clock.sleep(timeout_s)) if timeout_s is not None else None
    try:
        waiting: set[asyncio.Future[Any]] = set(futures)
        if timer is not None:
            waiting.add(timer)
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if timer is not None:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
    return next((index for index, future in enumerate(futures) if future.done()), None)


async def bounded(clock: Clock, timeout_s: float, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
    """Run ``awaitable`` for at most ``timeout_s`` on ``clock``; cancel it past that.

    Returns:
        ``(True, result)`` when it finished in time, ``(False, None)`` when it was cancelled.

    Raises:
        Whatever ``awaitable`` raised.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        if await first_done(clock, timeout_s, task) is None:
            return False, None
        return True, task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def wait_for(clock: Clock, timeout_s: float, awaitable: Awaitable[T]) -> T:
    """``asyncio.wait_for`` on ``clock``: the result of ``awaitable``, cancelled past ``timeout_s``.

    Raises:
        TimeoutError: ``timeout_s`` passed first (``awaitable`` was cancelled and has ended).
        Whatever ``awaitable`` raised.
    """
    finished, result = await bounded(clock, timeout_s, awaitable)
    if not finished:
        raise TimeoutError(f"not done within {timeout_s} s")
    return cast(T, result)


def perf_ns() -> int:
    """High-resolution counter used by benchmarks only."""
    return time.perf_counter_ns()


def thread_cpu_ns() -> int:
    """CPU time consumed by the calling thread, for per-core benchmarks."""
    return time.thread_time_ns()


def seconds_since_wall_ns(stamp_ns: int) -> float:
    """Seconds from a kernel ``CLOCK_REALTIME`` stamp (nanoseconds since the epoch) to now.

    For a host event the kernel timed (a datagram's arrival): a physical age, not a time policy,
    so it reads the real wall clock even where a fake clock is injected.
    """
    return (time.time_ns() - stamp_ns) / 1e9
