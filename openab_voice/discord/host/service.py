"""Voice sessions per guild: join, leave, look up. The slash commands and the demo go through here."""

from __future__ import annotations

import asyncio
import itertools
from typing import Protocol

import discord

from openab_voice.actions.ports import Audience
from openab_voice.discord.host.session import VoiceSession
from openab_voice.discord.wire.roster import channel_audience
from openab_voice.engine.expiry import SpeechCause
from openab_voice.errors import ErrorCode, VoiceError


class SessionFactory(Protocol):
    """Builds one voice session's parts, ready to connect (the composition root implements it).

    Args:
        channel: the voice channel to join.
        generation: the session's generation (one more than the last join's).
        text_channel_id: where the join was asked.
    """

    def __call__(
        self,
        channel: discord.VoiceChannel | discord.StageChannel,
        *,
        generation: int,
        text_channel_id: int | None,
    ) -> VoiceSession: ...


class VoiceSessions:
    """The joined sessions by guild: the voice facts the action plane trusts and the one way it speaks
    (:class:`~openab_voice.actions.ports.VoiceSide`). Only :class:`VoiceService` adds and removes."""

    def __init__(self) -> None:
        self._sessions: dict[int, VoiceSession] = {}

    def get(self, guild_id: int) -> VoiceSession | None:
        return self._sessions.get(guild_id)

    def all(self) -> list[VoiceSession]:
        return list(self._sessions.values())

    def put(self, session: VoiceSession) -> None:
        self._sessions[session.channel.guild.id] = session

    def pop(self, guild_id: int) -> VoiceSession | None:
        return self._sessions.pop(guild_id, None)

    def generation(self, guild_id: int) -> int | None:
        """The current voice-session generation of ``guild_id`` (None when not connected)."""
        session = self._sessions.get(guild_id)
        return None if session is None else session.generation

    def session_id(self, guild_id: int) -> str | None:
        """The random id of ``guild_id``'s current voice session (None when not connected)."""
        session = self._sessions.get(guild_id)
        return None if session is None else session.id

    def listeners(self, guild_id: int) -> frozenset[int] | None:
        session = self._sessions.get(guild_id)
        return None if session is None else session.listeners()

    def audience(self, guild_id: int, control_channel_id: int) -> Audience | None:
        """The listeners of ``guild_id``'s session and which of them view ``control_channel_id``."""
        session = self._sessions.get(guild_id)
        if session is None:
            return None
        listeners, viewers = channel_audience(
            session.channel, control_channel_id, session.channel.guild.me.id
        )
        return Audience(listeners=listeners, viewers=viewers)

    async def say(self, guild_id: int, text: str, *, cause: SpeechCause | None = None) -> bool:
        session = self._sessions.get(guild_id)
        return False if session is None else await session.say(text, cause=cause)


class VoiceService:
    """At most one :class:`VoiceSession` per guild; closes each one it joined.

    Args:
        sessions: where joined sessions are registered (shared with the action plane, which reads it).
        factory: builds each new session's parts.
    """

    def __init__(self, *, sessions: VoiceSessions, factory: SessionFactory) -> None:
        self._sessions = sessions
        self._factory = factory
        self._generations = itertools.count(1)
        self._lock = asyncio.Lock()
        self._joined = asyncio.Condition()

    def get(self, guild_id: int) -> VoiceSession | None:
        return self._sessions.get(guild_id)

    @property
    def sessions(self) -> list[VoiceSession]:
        return self._sessions.all()

    async def join(
        self, channel: discord.VoiceChannel | discord.StageChannel, *, text_channel_id: int | None = None
    ) -> VoiceSession:
        """Join ``channel`` (moving away from another channel in the same guild first).

        Args:
            text_channel_id: where the join was asked; the control channel for actions unless
                ``OPENAB_ACTION_CHANNEL_ID`` names one.
        """
        async with self._lock:
            existing = self._sessions.get(channel.guild.id)
            if existing is not None:
                if existing.channel.id == channel.id:
                    return existing
                await existing.aclose(reason="moved")
                self._sessions.pop(channel.guild.id)
            session = self._factory(
                channel, generation=next(self._generations), text_channel_id=text_channel_id
            )
            try:
                await session.connect()
            except (TimeoutError, discord.DiscordException, OSError) as exc:
                await session.aclose(reason="connect_failed")
                raise VoiceError(
                    f"could not join {channel.name}: {exc}", code=ErrorCode.VOICE_CONNECT_FAILED
                ) from exc
            self._sessions.put(session)
        async with self._joined:
            self._joined.notify_all()
        return session

    async def wait_joined(self, guild_id: int) -> VoiceSession:
        """Wait until a session exists for ``guild_id`` (the demo joins through the slash command)."""
        async with self._joined:
            await self._joined.wait_for(lambda: self._sessions.get(guild_id) is not None)
        session = self._sessions.get(guild_id)
        assert session is not None
        return session

    async def leave(self, guild_id: int) -> bool:
        async with self._lock:
            session = self._sessions.pop(guild_id)
        if session is None:
            return False
        await session.aclose(reason="leave")
        return True

    def gateway_lost(self) -> None:
        """The main gateway dropped: every session notes the start of a control gap."""
        for session in self._sessions.all():
            session.gateway_lost()

    def gateway_resumed(self) -> None:
        """The main gateway is back: every session reports its control gap."""
        for session in self._sessions.all():
            session.gateway_resumed()

    async def aclose(self) -> None:
        for session in self._sessions.all():
            await self.leave(session.channel.guild.id)
