"""Blocking provider work (Piper synthesis, llama.cpp generation) streamed back to asyncio.

One :class:`WorkerThread` per provider: a job runs on its single thread and hands items to the event
loop that started it; closing the consuming iterator sets the job's ``stop`` event so it ends before
its next item. :meth:`WorkerThread.aclose` waits, bounded, only for jobs of the running loop: a job
started on a loop that has since closed (a provider shared across event loops, as in tests) never
completes its future.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, TypeVar

from openab_voice.errors import WorkerFailed
from openab_voice.priority import COMPUTE_NICE, lower_current_thread

Emit = Callable[[object], None]
Job = Callable[[threading.Event, Emit], None]

_END: Final = object()
_T = TypeVar("_T")


def _lower() -> None:
    lower_current_thread(COMPUTE_NICE)


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


class WorkerThread:
    """A single worker thread whose jobs stream items to the calling event loop."""

    def __init__(
        self, name: str, *, close_timeout_s: float = 5.0, priority: Callable[[], object] = _lower
    ) -> None:
        # Compute yields to the audio plane (openab_voice/priority.py): the thread sets its own
        # priority first, and native thread pools it starts inherit it.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=priority)
        self._jobs: set[asyncio.Future[None]] = set()
        self._close_timeout_s = close_timeout_s

    def call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the worker and wait for its result (set-up work such as loading a model,
        whose native thread pools then start from the worker and inherit its priority)."""
        return self._executor.submit(fn).result()

    async def stream(self, job: Job) -> AsyncIterator[object]:
        """Run ``job(stop, emit)`` on the worker; yield what it emits, in order.

        Raises:
            WorkerFailed: the job raised.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                stop.set()

        def run() -> None:
            try:
                job(stop, emit)
            except Exception as exc:  # handed to the consumer, raised there
                emit(_Failed(exc))
            finally:
                emit(_END)

        future = loop.run_in_executor(self._executor, run)
        self._jobs.add(future)
        future.add_done_callback(self._jobs.discard)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise WorkerFailed(item.error) from item.error
                yield item
        finally:
            stop.set()  # closed early or cancelled: the job stops before its next item

    def shutdown(self) -> None:
        """Let the thread go without waiting (nothing was started on it, or nothing is awaited)."""
        self._executor.shutdown(wait=False)

    async def aclose(self) -> None:
        """Wait (bounded) for this loop's jobs in flight, then let the thread go. Idempotent."""
        loop = asyncio.get_running_loop()
        mine = {job for job in self._jobs if job.get_loop() is loop and not job.done()}
        self._jobs.clear()
        if mine:
            # On the loop's clock, not an injected one: these jobs run on a real thread in real time,
            # and a provider is built without a clock; the bound is only how long a close may wait.
            await asyncio.wait(mine, timeout=self._close_timeout_s)
        self.shutdown()
