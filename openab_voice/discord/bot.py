"""The discord.py client: intents, the ``/voice`` commands, command sync, clean shutdown."""

from __future__ import annotations

import logging

import aiohttp
import discord
from discord import app_commands

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.commands import build_voice_group
from openab_voice.discord.service import VoiceService
from openab_voice.discord.session import SessionOptions
from openab_voice.engine.bundle import ConversationProviders

log = logging.getLogger(__name__)


class VoiceBot(discord.Client):
    """discord.py ``Client`` with the ``/voice`` group and a :class:`VoiceService`."""

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        options: SessionOptions,
        providers: ConversationProviders | None = None,
        command_guild_id: int | None = None,
        connector: aiohttp.BaseConnector | None = None,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        intents = discord.Intents.default()  # guilds + voice_states; no privileged intents needed
        super().__init__(intents=intents, connector=connector, guild_ready_timeout=guild_ready_timeout)
        self.bus = bus
        self.clock = clock
        self.voice = VoiceService(bus=bus, clock=clock, options=options, providers=providers)
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(build_voice_group(self.voice, bus=bus, clock=clock))
        self._command_guild_id = command_guild_id

    async def setup_hook(self) -> None:
        if self._command_guild_id is not None:
            guild = discord.Object(id=self._command_guild_id)
            self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
        else:
            synced = await self.tree.sync()
        log.info("synced %d application commands", len(synced))

    async def close(self) -> None:
        await self.voice.aclose()
        await super().close()
