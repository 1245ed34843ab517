"""The discord.py client: intents, the ``/voice`` commands, command sync, clicks, clean shutdown."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
from discord import app_commands

from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.ports import parse_button_id
from openab_voice.discord.host.service import VoiceService
from openab_voice.discord.wire.roster import AudienceFeed

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class BotParts:
    """What the client serves: its voice sessions, the ``/voice`` command group and, when actions are
    on, the action plane. The client owns them from then on: it starts the plane after command sync and
    closes sessions, then the plane, before it disconnects."""

    voice: VoiceService
    commands: app_commands.Group
    actions: ActionPlane | None = None
    audience: AudienceFeed | None = None


class VoiceBot(discord.Client):
    """discord.py ``Client`` serving the parts the composition root builds around it.

    Args:
        parts: called once, with this client, to build its parts: the control channel the action
            plane posts through needs the client, so the client cannot be handed them ready.
    """

    def __init__(
        self,
        *,
        parts: Callable[[discord.Client], BotParts],
        command_guild_id: int | None = None,
        connector: aiohttp.BaseConnector | None = None,
        guild_ready_timeout: float = 2.0,
        shard_ids: Sequence[int] | None = None,
        shard_count: int | None = None,
    ) -> None:
        intents = discord.Intents.default()  # guilds + voice_states; no privileged intents needed
        # Shards only reach discord.AutoShardedClient (ShardedVoiceBot); a plain Client gets none.
        shards: dict[str, Any] = {}
        if shard_count is not None:
            shards = {"shard_ids": list(shard_ids or range(shard_count)), "shard_count": shard_count}
        super().__init__(
            intents=intents, connector=connector, guild_ready_timeout=guild_ready_timeout, **shards
        )
        built = parts(self)
        self._voice = built.voice
        self._actions = built.actions
        self._audience = built.audience
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(built.commands)
        self._command_guild_id = command_guild_id

    @property
    def voice(self) -> VoiceService:
        return self._voice

    @property
    def actions(self) -> ActionPlane | None:
        return self._actions

    async def setup_hook(self) -> None:
        if self._command_guild_id is not None:
            guild = discord.Object(id=self._command_guild_id)
            self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
        else:
            synced = await self.tree.sync()
        log.info("synced %d application commands", len(synced))
        if self._actions is not None:
            await self._actions.start()

    async def on_disconnect(self) -> None:
        """The main gateway dropped (voice connections live on their own websockets)."""
        self._voice.gateway_lost()

    async def on_resumed(self) -> None:
        """The main gateway RESUMEd: nothing was missed, sessions report the gap."""
        self._voice.gateway_resumed()

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Confirm / Reject clicks on proposals (slash commands are the command tree's)."""
        if interaction.type is not discord.InteractionType.component or self._actions is None:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        parsed = parse_button_id(custom_id)
        if parsed is None:
            return
        decision, action_id = parsed
        outcome = await self._actions.broker.click(
            decision=decision,
            action_id=action_id,
            user_id=interaction.user.id,
            message_id=interaction.message.id if interaction.message is not None else None,
        )
        # Refusals (not the operator, expired, replayed) are only shown to the clicking user.
        await interaction.response.send_message(outcome.message, ephemeral=True)

    # Who hears the bot, and what they may read: discord.py has applied each event to its cache
    # before it dispatches these, so the audience read after them is the new one.

    async def on_voice_state_update(
        self, member: discord.Member, before: discord.VoiceState, after: discord.VoiceState
    ) -> None:
        if self._audience is not None:
            self._audience.voice_state(member, before, after)

    async def on_guild_channel_update(
        self, before: discord.abc.GuildChannel, after: discord.abc.GuildChannel
    ) -> None:
        if self._audience is not None:
            self._audience.channel(before, after)

    async def on_guild_role_update(self, before: discord.Role, after: discord.Role) -> None:
        if self._audience is not None:
            self._audience.role(before, after)

    async def on_member_update(self, before: discord.Member, after: discord.Member) -> None:
        if self._audience is not None:
            self._audience.member(before, after)

    async def close(self) -> None:
        await self._voice.aclose()
        if self._actions is not None:
            await self._actions.aclose()
        await super().close()


class ShardedVoiceBot(VoiceBot, discord.AutoShardedClient):
    """The same bot as discord.py shards: this process IDENTIFYs as ``shard_ids`` of ``shard_count``
    (one gateway connection each), and Discord sends it only those shards' guilds, so the voice
    sessions and proposals it holds are theirs alone."""
