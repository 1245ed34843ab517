"""Waiting with a deadline on the injected clock (``asyncio.wait_for`` would read the loop's clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from openab_voice.clock import Clock

T = TypeVar("T")


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
    """Run ``awaitable`` for at most ``timeout_s``; cancel it past that.

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
