"""Virtual time that advances itself, deterministically, from one sleeper's deadline to the next.

:class:`VirtualClock` is a :class:`~openab_voice.clock.FakeClock` that drives itself:
:meth:`~VirtualClock.run_for` and :meth:`~VirtualClock.run_until` repeatedly *settle* the event loop
(run it until no callback is ready but the driver's own) and then jump the clock to the earliest
sleeper's deadline, never past the target. Nothing is stepped in fixed increments and no fixed number
of loop turns is assumed: a chain of any length of ready callbacks runs before time moves, every
sleeper wakes exactly at its deadline, and a loop that never goes quiet (a livelock) is reported as
:class:`SettleError` instead of being silently outrun.

Settling reads the running loop's queue of ready callbacks (``loop._ready``, the standard asyncio
loop's). A quiet loop is checked twice, one loop turn apart, so I/O that became readable during the
last turn (a loopback socket) is polled before time moves.

Worker threads run in real time. Were the clock moved while such work is in flight, a timeout in
virtual seconds would pass in a few real milliseconds. So work given to a :class:`WorkerThreads`
executor (installed as the loop's default, it takes every ``asyncio.to_thread``) is waited for, in
real time and bounded, before the loop counts as settled: the clock waits on the work's completion,
never on time. ``with clock.threads():`` installs one for the block.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from openab_voice.clock import FakeClock, SystemClock, first_done
from openab_voice.errors import SettleError

__all__ = ["VirtualClock", "WorkerThreads"]

P = ParamSpec("P")
T = TypeVar("T")

MAX_SETTLE_TURNS = 100_000  # loop turns one settle may take before it is called a livelock
WORKER_LIMIT_S = 60.0  # real seconds the worker threads may take, all pending work together
_QUIET_TURNS = 2


class WorkerThreads(concurrent.futures.ThreadPoolExecutor):
    """A default executor that keeps the work in flight so virtual time can wait for it.

    ``submit`` is called on the loop's thread (``run_in_executor``), so the set is only touched there.
    """

    def __init__(self, max_workers: int = 4) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="virtual-time-worker")
        self._in_flight: set[concurrent.futures.Future[Any]] = set()

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        future = super().submit(fn, *args, **kwargs)
        self._in_flight.add(future)
        return future

    async def wait_idle(self, limit_s: float = WORKER_LIMIT_S) -> bool:
        """Wait (real time) for the work in flight; True when there was some.

        Raises:
            TimeoutError: the work took longer than ``limit_s`` real seconds.
        """
        self._in_flight = {f for f in self._in_flight if not f.done()}
        if not self._in_flight:
            return False
        waiting = asyncio.gather(*(asyncio.wrap_future(f) for f in self._in_flight), return_exceptions=True)
        if await first_done(SystemClock(), limit_s, waiting) is None:
            raise TimeoutError(f"worker threads still busy after {limit_s:g} s")
        return True


class VirtualClock(FakeClock):
    """A fake clock that advances itself: ``await clock.run_for(s)``, ``await clock.run_until(p)``.

    ``advance`` still moves time by hand (a stall the code under test should notice, for one).
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: float = 1_700_000_000.0,
        *,
        workers: WorkerThreads | None = None,
        max_turns: int = MAX_SETTLE_TURNS,
    ) -> None:
        super().__init__(start, wall_start)
        self.workers = workers
        self._max_turns = max_turns

    @contextlib.contextmanager
    def threads(self) -> Iterator[WorkerThreads]:
        """Within the block, the running loop's ``to_thread`` work goes to threads this clock waits for."""
        loop = asyncio.get_running_loop()
        previous = getattr(loop, "_default_executor", None)
        workers = self.workers = self.workers or WorkerThreads()
        loop.set_default_executor(workers)
        try:
            yield workers
        finally:
            # asyncio has no public way back to the previous default executor.
            loop._default_executor = previous  # type: ignore[attr-defined]
            self.workers = None
            workers.shutdown(wait=False)

    async def settle(self) -> None:
        """Run the loop until nothing is ready but this caller and no worker thread is busy.

        Virtual time stands still meanwhile.

        Raises:
            SettleError: the loop was still busy after ``max_turns`` turns (a livelock).
        """
        loop = asyncio.get_running_loop()
        ready = _ready_queue(loop)
        quiet = 0
        for _ in range(self._max_turns):
            await FakeClock.sleep(self, 0)  # one loop turn, its I/O poll included
            if ready or (self.workers is not None and await self.workers.wait_idle()):
                quiet = 0
                continue
            quiet += 1
            if quiet == _QUIET_TURNS:
                return
        busy = ", ".join(repr(handle) for handle in list(ready)[:5])
        raise SettleError(f"event loop still busy after {self._max_turns} turns (a livelock?): {busy}")

    async def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, every sleeper waking exactly at its deadline."""
        target = self.monotonic() + seconds
        await self.settle()
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            self.advance_to(deadline)
            await self.settle()
        self.advance_to(target)
        await self.settle()

    async def run_until(self, predicate: Callable[[], bool], *, limit_s: float = 30.0) -> bool:
        """Advance until ``predicate()`` holds (True) or ``limit_s`` virtual seconds passed (False).

        The predicate is checked whenever the loop has settled, so it is caught at the exact virtual
        time it first holds.
        """
        limit = self.monotonic() + limit_s
        await self.settle()
        while not predicate():
            deadline = self.next_deadline()
            if deadline is None or deadline > limit:
                self.advance_to(limit)
                await self.settle()
                return predicate()
            self.advance_to(deadline)
            await self.settle()
        return True


def _ready_queue(loop: asyncio.AbstractEventLoop) -> Any:
    ready = getattr(loop, "_ready", None)
    if ready is None:
        raise TypeError(f"virtual time needs asyncio's own event loop (one with _ready), not {type(loop)}")
    return ready
