"""The injected clock: the only module that reads time or sleeps.

Components take a :class:`Clock`; production code passes :class:`SystemClock`, tests pass
:class:`FakeClock` and advance it explicitly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable


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
        self._now += seconds
        while self._waiters and self._waiters[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)


def perf_ns() -> int:
    """High-resolution counter used by benchmarks only."""
    return time.perf_counter_ns()


def thread_cpu_ns() -> int:
    """CPU time consumed by the calling thread, for per-core benchmarks."""
    return time.thread_time_ns()
