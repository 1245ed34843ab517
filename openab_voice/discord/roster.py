"""Who is in the bot's voice channel: the humans the turn policy counts, and their display names."""

from __future__ import annotations

import discord


class ChannelRoster:
    """Live view of a voice channel's members (discord.py keeps ``channel.members`` current from
    VOICE_STATE_UPDATE; the default intents cache voice members). Bots never count as humans."""

    def __init__(self, channel: discord.VoiceChannel | discord.StageChannel, bot_user_id: int) -> None:
        self._channel = channel
        self._bot_user_id = bot_user_id

    def humans(self) -> set[str]:
        return {str(m.id) for m in self._channel.members if not m.bot and m.id != self._bot_user_id}

    def display_name(self, user_id: str) -> str:
        member = self._channel.guild.get_member(int(user_id)) if user_id.isdigit() else None
        return member.display_name if member is not None else user_id
