"""Voice sessions per guild: join, leave, look up. The slash commands and the demo go through here."""

from __future__ import annotations

import asyncio
import itertools

import discord

from openab_voice.actions.broker import ActionBroker
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.session import SessionOptions, VoiceSession
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.errors import VoiceError


class VoiceService:
    """At most one :class:`VoiceSession` per guild."""

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        options: SessionOptions,
        providers: ConversationProviders | None = None,
        action_channel_id: int | None = None,
    ) -> None:
        self._providers = providers
        # Set by the bot once the action plane is bound (it needs this service as its voice side).
        self.broker: ActionBroker | None = None
        self._action_channel_id = action_channel_id
        self._generations = itertools.count(1)
        self._bus = bus
        self._clock = clock
        self._options = options
        self._sessions: dict[int, VoiceSession] = {}
        self._lock = asyncio.Lock()
        self._joined = asyncio.Condition()

    def get(self, guild_id: int) -> VoiceSession | None:
        return self._sessions.get(guild_id)

    @property
    def sessions(self) -> list[VoiceSession]:
        return list(self._sessions.values())

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

    async def say(self, guild_id: int, text: str) -> bool:
        session = self._sessions.get(guild_id)
        return False if session is None else await session.say(text)

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
                if existing.channel is not None and existing.channel.id == channel.id:
                    return existing
                await existing.aclose(reason="moved")
                self._sessions.pop(channel.guild.id, None)
            session = VoiceSession(
                bus=self._bus,
                clock=self._clock,
                options=self._options,
                providers=self._providers,
                generation=next(self._generations),
                broker=self.broker,
                text_channel_id=self._action_channel_id or text_channel_id,
            )
            try:
                await session.connect(channel)
            except (TimeoutError, discord.DiscordException, OSError) as exc:
                await session.aclose(reason="connect_failed")
                raise VoiceError(
                    f"could not join {channel.name}: {exc}", code="VOICE_CONNECT_FAILED"
                ) from exc
            self._sessions[channel.guild.id] = session
        async with self._joined:
            self._joined.notify_all()
        return session

    async def wait_joined(self, guild_id: int) -> VoiceSession:
        """Wait until a session exists for ``guild_id`` (the demo joins through the slash command)."""
        async with self._joined:
            await self._joined.wait_for(lambda: guild_id in self._sessions)
        return self._sessions[guild_id]

    async def leave(self, guild_id: int) -> bool:
        async with self._lock:
            session = self._sessions.pop(guild_id, None)
        if session is None:
            return False
        await session.aclose(reason="leave")
        return True

    async def aclose(self) -> None:
        for guild_id in list(self._sessions):
            await self.leave(guild_id)
