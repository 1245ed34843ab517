"""Hang guards: bound how long the emulator waits for the bot, on the event loop's own timer.

These are not simulated delays (those go through the injected clock): they turn a bot that never
answers into a prompt ``EMULATOR_TIMEOUT`` instead of a hung test, also under a fake clock.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from openab_voice.errors import EmulatorError, ErrorCode


class HangGuard:
    """``async with HangGuard(5.0, "what we waited for"):`` raises ``EMULATOR_TIMEOUT`` when the body
    does not finish within the given seconds."""

    def __init__(self, seconds: float, message: str) -> None:
        self._timeout = asyncio.timeout(seconds)  # noqa: TID251 -- a hang guard, on the loop's timer on purpose
        self._message = message

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            raise EmulatorError(self._message, code=ErrorCode.EMULATOR_TIMEOUT) from None


async def wait_any(*events: asyncio.Event) -> None:
    """Return as soon as one of ``events`` is set (e.g. "done" or "connection closed")."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
