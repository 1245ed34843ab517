"""The emulator's sharded gateway with unmodified discord.py clients: two guilds of one bot, one client
per shard of two; each is given only the guild on its shard and hears only that guild's events, and a
shard that does not exist is refused with 4010."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import aiohttp
import discord
import pytest

from openab_voice.shards import shard_of
from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig, build_client, running_client

pytestmark = pytest.mark.e2e

ALICE = 1001


@pytest.fixture
async def guilds() -> AsyncIterator[dict[int, DiscordEmulator]]:
    """Two guilds of one bot, keyed by their shard of 2."""
    config = EmulatorConfig(dave=False)
    async with DiscordEmulator(config) as first:
        second = DiscordEmulator(config, joined=first, shard=(1 - shard_of(first.guild_id, 2), 2))
        async with second:
            for guild in (first, second):
                guild.add_user(ALICE, "alice", in_voice=False)
            yield {shard_of(g.guild_id, 2): g for g in (first, second)}


async def test_each_shard_is_given_and_told_only_its_guild(guilds: dict[int, DiscordEmulator]) -> None:
    intents = discord.Intents.default() | discord.Intents(message_content=True)
    # Both connect through guild 0's port, whichever guild it is: each port fronts every guild.
    clients: dict[int, discord.Client] = {
        n: build_client(guilds[0], intents=intents, shard_id=n, shard_count=2) for n in (0, 1)
    }
    heard: dict[int, asyncio.Queue[discord.Message]] = {n: asyncio.Queue() for n in clients}
    for n, client in clients.items():
        client.event(_recorder(heard[n]))
    async with running_client(guilds[0], clients[0]), running_client(guilds[0], clients[1]):
        for n, client in clients.items():
            assert [g.id for g in client.guilds] == [guilds[n].guild_id]

        # Guild 0's message first, then guild 1's: shard 1 hearing guild 0 would hear it first.
        guilds[0].post_user_message(ALICE, "for shard zero")
        guilds[1].post_user_message(ALICE, "for shard one")
        for n in clients:
            message = await asyncio.wait_for(heard[n].get(), 10)
            assert message.guild is not None and message.guild.id == guilds[n].guild_id
            assert message.content == ("for shard zero" if n == 0 else "for shard one")
        # The REST port routes each channel to its guild: each shard posts into its own.
        for n, client in clients.items():
            channel = client.get_channel(guilds[n].text_channel_id)
            assert isinstance(channel, discord.TextChannel)
            await channel.send(f"posted by shard {n}")
        for n in clients:
            assert [m["content"] for m in guilds[n].messages() if m["author"]["bot"]] == [
                f"posted by shard {n}"
            ]


def _recorder(
    queue: asyncio.Queue[discord.Message],
) -> Callable[[discord.Message], Coroutine[Any, Any, None]]:
    async def on_message(message: discord.Message) -> None:
        if not message.author.bot:
            queue.put_nowait(message)

    return on_message


@pytest.mark.parametrize("shard", [[2, 2], [0, 0], [1]])
async def test_a_shard_that_does_not_exist_is_refused(
    guilds: dict[int, DiscordEmulator], shard: list[int]
) -> None:
    emulator = guilds[0]
    identify = {"op": 2, "d": {"token": emulator.token, "intents": 0, "shard": shard}}
    async with (
        aiohttp.ClientSession(connector=emulator.client_connector()) as http,
        http.ws_connect("wss://gateway.discord.gg/?v=10&encoding=json") as ws,
    ):
        assert (await ws.receive_json())["op"] == 10
        await ws.send_str(json.dumps(identify))
        msg = await ws.receive()
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, 4010)
