"""The discord.py client: intents, the ``/voice`` commands, command sync, clean shutdown."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import discord
from discord import app_commands

from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.ports import parse_button_id
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.commands import build_voice_group
from openab_voice.discord.control import DiscordControlChannel
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
        actions: ActionPlane | None = None,
        command_guild_id: int | None = None,
        connector: aiohttp.BaseConnector | None = None,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        intents = discord.Intents.default()  # guilds + voice_states; no privileged intents needed
        super().__init__(intents=intents, connector=connector, guild_ready_timeout=guild_ready_timeout)
        self.bus = bus
        self.clock = clock
        self.actions = actions
        self.voice = VoiceService(
            bus=bus,
            clock=clock,
            options=options,
            providers=providers,
            action_channel_id=actions.channel_id if actions is not None else None,
        )
        if actions is not None:
            actions.bind(channel=DiscordControlChannel(self), voice=self.voice)
            self.voice.broker = actions.broker
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
        if self.actions is not None:
            await self.actions.start()

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Confirm / Reject clicks on proposals (slash commands are the command tree's)."""
        if interaction.type is not discord.InteractionType.component or self.actions is None:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        parsed = parse_button_id(custom_id)
        if parsed is None:
            return
        decision, action_id = parsed
        outcome = await self.actions.broker.click(
            decision=decision,
            action_id=action_id,
            user_id=interaction.user.id,
            message_id=interaction.message.id if interaction.message is not None else None,
        )
        # Refusals (not the operator, expired, replayed) are only shown to the clicking user.
        await interaction.response.send_message(outcome.message, ephemeral=True)

    async def close(self) -> None:
        await self.voice.aclose()
        if self.actions is not None:
            await self.actions.aclose()
        await super().close()
