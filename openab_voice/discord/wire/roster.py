"""Who is in the bot's voice channel: the humans the turn policy counts, their display names, who of
the listeners can read the control channel, and the gateway events that may change any of it."""

from __future__ import annotations

import discord

from openab_voice.bus import EventBus
from openab_voice.bus.events import AudienceChanged
from openab_voice.clock import Clock

VoiceChannel = discord.VoiceChannel | discord.StageChannel


class ChannelRoster:
    """Live view of a voice channel's members (discord.py keeps ``channel.members`` current from
    VOICE_STATE_UPDATE; the default intents cache voice members). Bots never count as humans."""

    def __init__(self, channel: VoiceChannel, bot_user_id: int) -> None:
        self._channel = channel
        self._bot_user_id = bot_user_id

    def humans(self) -> set[str]:
        return {str(m.id) for m in self._channel.members if not m.bot and m.id != self._bot_user_id}

    def display_name(self, user_id: str) -> str:
        member = self._channel.guild.get_member(int(user_id)) if user_id.isdigit() else None
        return member.display_name if member is not None else user_id


def channel_audience(
    channel: VoiceChannel, control_channel_id: int, bot_user_id: int
) -> tuple[frozenset[int], frozenset[int]]:
    """Everyone in ``channel`` but the bot (other bots included), and those of them who can view the
    control channel, from discord.py's cache (channel overwrites, roles and the guild owner are all
    in ``permissions_for``). A control channel the cache does not know is viewed by nobody."""
    listeners = [m for m in channel.members if m.id != bot_user_id]
    control = channel.guild.get_channel_or_thread(control_channel_id)
    viewers = (
        frozenset(m.id for m in listeners if control.permissions_for(m).view_channel)
        if control is not None
        else frozenset()
    )
    return frozenset(m.id for m in listeners), viewers


class AudienceFeed:
    """Turns the gateway events that can change an audience into ``AudienceChanged`` on the bus.

    The client calls it from its ``on_*`` handlers, which discord.py dispatches after it applied the
    event to its cache. A voice state that stays in the same channel (mute, deafen, video) changes no
    audience and is not published; neither is a channel or role update that leaves permissions alone.
    """

    def __init__(self, *, bus: EventBus, clock: Clock) -> None:
        self._bus = bus
        self._clock = clock

    def voice_state(
        self, member: discord.Member, before: discord.VoiceState, after: discord.VoiceState
    ) -> None:
        """VOICE_STATE_UPDATE: a join, a leave or a move."""
        old, new = before.channel, after.channel
        if (old.id if old else None) == (new.id if new else None):
            return
        for channel in (old, new):
            if channel is not None:
                self._publish(member.guild.id, "voice_state", user_id=member.id, channel_id=channel.id)

    def channel(self, before: discord.abc.GuildChannel, after: discord.abc.GuildChannel) -> None:
        """CHANNEL_UPDATE: published when the permission overwrites changed."""
        if before.overwrites != after.overwrites:
            self._publish(after.guild.id, "channel_permissions", channel_id=after.id)

    def role(self, before: discord.Role, after: discord.Role) -> None:
        """GUILD_ROLE_UPDATE: published when the role's permissions changed."""
        if before.permissions != after.permissions:
            self._publish(after.guild.id, "role_permissions")

    def member(self, before: discord.Member, after: discord.Member) -> None:
        """GUILD_MEMBER_UPDATE (needs the members intent): published when the roles changed."""
        if before.roles != after.roles:
            self._publish(after.guild.id, "member_roles", user_id=after.id)

    def _publish(
        self, guild_id: int, kind: str, *, user_id: int | None = None, channel_id: int | None = None
    ) -> None:
        self._bus.publish(
            AudienceChanged(
                at=self._clock.monotonic(),
                guild_id=str(guild_id),
                kind=kind,
                user_id=None if user_id is None else str(user_id),
                channel_id=None if channel_id is None else str(channel_id),
            )
        )
