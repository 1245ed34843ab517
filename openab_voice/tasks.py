"""One owner for a component's background tasks.

A component spawns its tasks through a :class:`TaskOwner`: each task is kept until it ends (so it is
never garbage-collected mid-flight, ruff's RUF006), an exception it ends with goes to the event loop's
exception handler at once, named after the owner and the task, instead of waiting for a garbage
collection that may never come, and :meth:`TaskOwner.aclose` cancels and awaits whatever is left,
after an optional grace on the injected clock for the tasks to end by themselves.

Why not :class:`asyncio.TaskGroup`: a group lives inside one ``async with`` block of its creator and
cancels every sibling when one task fails. Our components spawn from synchronous callbacks (a bus
handler, ``push_frame``, an effect dispatcher) over a life that no single block spans, and one
failed response must not cancel the provider connection beside it.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from openab_voice.clock import Clock, bounded

__all__ = ["OwnerPhase", "TaskOwner"]

T = TypeVar("T")


class OwnerPhase(enum.Enum):
    """Where a :class:`TaskOwner` is in its life (it only moves forward)."""

    OPEN = "open"  # spawning
    CLOSING = "closing"  # aclose() runs: what is spawned now is taken down with the rest
    CLOSED = "closed"  # every task has ended; spawning is a bug


class TaskOwner:
    """Spawns, keeps and closes one component's tasks.

    Args:
        name: the owner's name, in the report of a task that failed.
        clock: the injected clock, for a close with a grace (none needed otherwise).
    """

    def __init__(self, name: str, *, clock: Clock | None = None) -> None:
        self.name = name
        self._clock = clock
        self._tasks: set[asyncio.Task[Any]] = set()
        self.phase = OwnerPhase.OPEN

    def spawn(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str,
        on_done: Callable[[asyncio.Task[T]], None] | None = None,
    ) -> asyncio.Task[T]:
        """Run ``coro`` as a task named ``name``, kept until it ends.

        Args:
            coro: the work.
            name: the task's name.
            on_done: called once the task ended and left the owner (so :meth:`__len__` no longer
                counts it).

        Raises:
            RuntimeError: the owner is closed (``coro`` is closed unstarted).
        """
        if self.phase is OwnerPhase.CLOSED:
            coro.close()
            raise RuntimeError(f"{self.name} is closed: it cannot run {name}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)

        def ended(done: asyncio.Task[T]) -> None:
            self._tasks.discard(done)
            self._report(done)
            if on_done is not None:
                on_done(done)

        task.add_done_callback(ended)
        return task

    def __len__(self) -> int:
        """How many of its tasks have not ended."""
        return len(self._tasks)

    @property
    def tasks(self) -> frozenset[asyncio.Task[Any]]:
        return frozenset(self._tasks)

    async def aclose(self, *, grace_s: float = 0.0) -> None:
        """Give the tasks ``grace_s`` on the clock to end, then cancel and await what is left.

        Idempotent; a task spawned while closing is taken down too. Never bounded past the grace: a
        task that ignores its cancellation is a bug this waits for rather than hides.

        Raises:
            ValueError: a grace without a clock.
        """
        if self.phase is OwnerPhase.CLOSED:
            return
        self.phase = OwnerPhase.CLOSING
        if grace_s > 0 and self._tasks:
            if self._clock is None:
                raise ValueError(f"{self.name}: a close grace needs a clock")
            deadline = self._clock.monotonic() + grace_s
            while self._tasks and (left := deadline - self._clock.monotonic()) > 0:
                await bounded(self._clock, left, asyncio.wait(set(self._tasks)))
        while self._tasks:
            pending = tuple(self._tasks)
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)
            self._tasks.difference_update(pending)
        self.phase = OwnerPhase.CLOSED

    def _report(self, task: asyncio.Task[Any]) -> None:
        """Hand an unexpected exception to the loop's handler now (asyncio would only at collection)."""
        if task.cancelled():
            return
        exc = task.exception()  # retrieved: asyncio does not report it a second time
        if exc is not None:
            task.get_loop().call_exception_handler(
                {"message": f"{self.name}: task {task.get_name()} failed", "exception": exc, "task": task}
            )
