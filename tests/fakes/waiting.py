"""Waiting in a test for a condition that nothing signals: poll it, under a deadline that fails clearly.

Prefer an event, a future or a gate when the code under test offers one; this is for state that
threads, subprocesses or the network change (a pid file, the emulator's records, a job row).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest


async def until(
    predicate: Callable[[], object],
    what: str | Callable[[], str],
    *,
    within_s: float = 30.0,
    every_s: float = 0.01,
) -> None:
    """Return once ``predicate()`` is truthy; fail with ``what`` (text, or a function that describes
    the state for the failure message) when ``within_s`` seconds of real time pass first."""
    try:
        async with asyncio.timeout(within_s):
            while not predicate():  # noqa: ASYNC110
                await asyncio.sleep(every_s)  # real time: polls state that has no event to wait on
    except TimeoutError:
        described = what() if callable(what) else what
        raise AssertionError(f"timed out after {within_s} s waiting for {described}") from None


async def cancel_once_started(task: asyncio.Task[Any], started: asyncio.Event, *, within_s: float) -> None:
    """Cancel ``task`` once ``started`` is set (fail if not within ``within_s``); it must end cancelled."""
    await asyncio.wait_for(started.wait(), within_s)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
