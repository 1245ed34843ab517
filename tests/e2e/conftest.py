"""Shared end-to-end fixtures: a running loopback emulator, discord.py clients wired to it, and the
speech models with the module's ``LINES`` spoken (``voices``).

Usage::

    async def test_x(emulator, discord_client):
        client = discord_client()                       # discord.Client(connector=emulator.client_connector())
        async with running_client(emulator, client):    # login + connect + on_ready; closed on exit
            ...

    @pytest.mark.parametrize("emulator", [EmulatorConfig(dave=True)], indirect=True)
    async def test_y(emulator): ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import discord
import pytest

from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig, build_client
from tests.fakes.voices import Voices, voices_for

ClientFactory = Callable[..., Any]


@pytest.fixture(scope="module")
def voices(request: pytest.FixtureRequest) -> Iterator[Voices]:
    """faster-whisper, Piper and the module's ``LINES`` ({key: text}) spoken by Piper, once per module."""
    yield from voices_for(request.module.LINES)


@pytest.fixture
async def emulator(request: pytest.FixtureRequest) -> AsyncIterator[DiscordEmulator]:
    """A started emulator (DAVE off unless parametrized indirectly with an ``EmulatorConfig``)."""
    config = getattr(request, "param", None) or EmulatorConfig(dave=False)
    async with DiscordEmulator(config) as emu:
        yield emu


@pytest.fixture
async def discord_client(emulator: DiscordEmulator) -> AsyncIterator[ClientFactory]:
    """A factory of discord.py clients wired to ``emulator``; any left open are closed at teardown.

    ``discord_client(cls=MyBot, intents=..., **kwargs)``; ``guild_ready_timeout`` defaults to 0.1 s.
    """
    made: list[discord.Client] = []

    def make(**kwargs: Any) -> Any:
        client = build_client(emulator, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        if not client.is_closed():
            await client.close()
        # A client that never logged in has no session to close its connector for it.
        connector = client.http.connector
        if connector is not discord.utils.MISSING and not connector.closed:
            await connector.close()
