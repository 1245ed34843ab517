"""Run a discord.py client against a :class:`DiscordEmulator` for the span of an ``async with``.

Nothing process-global is touched: the client reaches the emulator through its connector only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import discord

from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.server import DiscordEmulator

ClientT = TypeVar("ClientT", bound=discord.Client)


def build_client(
    emulator: DiscordEmulator,
    *,
    cls: type[ClientT] = discord.Client,  # type: ignore[assignment]
    intents: discord.Intents | None = None,
    **kwargs: Any,
) -> ClientT:
    """A client wired to ``emulator``; call inside the running loop.

    ``guild_ready_timeout`` defaults to 0.1 s (discord.py waits that long after the last
    GUILD_CREATE before ``on_ready``).
    """
    kwargs.setdefault("guild_ready_timeout", 0.1)
    return cls(
        intents=intents if intents is not None else discord.Intents.default(),
        connector=emulator.client_connector(),
        **kwargs,
    )


@contextlib.asynccontextmanager
async def running_client(
    emulator: DiscordEmulator,
    client: ClientT,
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 (a hang guard on the loop's timer)
    token: str | None = None,
) -> AsyncIterator[ClientT]:
    """Log ``client`` in, connect it, wait for ``on_ready``; close it on exit.

    Args:
        token: log in with this token instead of the emulator's (to test a rejected login).

    Raises:
        EmulatorError: ``EMULATOR_TIMEOUT`` when the client is not ready in time; the client's own
            exception when it fails to log in or connect.
    """
    try:
        await client.login(emulator.token if token is None else token)
        runner = asyncio.create_task(client.connect(reconnect=False), name="discord-client")
        ready = asyncio.create_task(client.wait_until_ready(), name="discord-client-ready")
        try:
            done, _ = await asyncio.wait(
                {runner, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if runner in done:
                runner.result()  # re-raise why the client stopped
                raise EmulatorError(
                    "the client stopped before it was ready", code=ErrorCode.EMULATOR_CLIENT_STOPPED
                )
            if ready not in done:
                raise EmulatorError("the client did not become ready", code=ErrorCode.EMULATOR_TIMEOUT)
            yield client
        finally:
            ready.cancel()
            await client.close()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            await runner
    finally:
        if not client.is_closed():
            await client.close()
