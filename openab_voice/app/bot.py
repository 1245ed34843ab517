"""The application: the long-lived parts built once from settings, and the bot built around them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

import aiohttp
import discord

from openab_voice.actions.plane import ActionPlane
from openab_voice.app.actions import ActionParts, build_action_parts
from openab_voice.app.providers import build_providers, check_providers, probe_engine
from openab_voice.app.records import RecordParts, build_record_parts
from openab_voice.app.sessions import SessionFactory, session_options
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings
from openab_voice.discord.host.bot import BotParts, ShardedVoiceBot, VoiceBot
from openab_voice.discord.host.commands import VoiceCommands
from openab_voice.discord.host.control import DiscordControlChannel
from openab_voice.discord.host.service import VoiceService, VoiceSessions
from openab_voice.discord.wire.roster import AudienceFeed
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.errors import ConfigError
from openab_voice.memory.meeting import MeetingRecords
from openab_voice.shards import shard_range


class EmulatorLink(Protocol):
    """What the client factory needs from the loopback emulator (``testing.emulator.DiscordEmulator``)."""

    token: str

    def client_connector(self) -> aiohttp.TCPConnector: ...


@dataclass(slots=True, kw_only=True)
class Application:
    """One process's long-lived parts: the providers every voice session shares and, when actions are
    on, the action plane's store and workspaces. :meth:`create_bot` builds a client around them.

    :func:`build_app` builds one that closes its parts on :meth:`aclose`; one made directly from parts
    someone else built (a test's fakes) closes nothing it was given: ``owns`` is False.
    """

    settings: Settings
    bus: EventBus
    clock: Clock
    providers: ConversationProviders
    actions: ActionParts | None = None
    records: RecordParts | None = None
    owns: bool = False

    def create_bot(self, *, emulator: EmulatorLink | None = None) -> VoiceBot:
        """Build the client. Call inside the running event loop (the connector binds to it).

        Args:
            emulator: connect to this loopback emulator instead of Discord. This explicit argument is
                the only way to redirect the client: no process-global is changed.

        Raises:
            ConfigError: the shard settings give this pod no shard range (``OPENAB_SHARD_ORDINAL``).
        """
        connector = emulator.client_connector() if emulator is not None else None
        # Many guilds: this pod runs its range of discord.py shards (OPENAB_SHARD_COUNT and the ordinal).
        shards = shard_range(self.settings)
        if shards is None:
            return VoiceBot(
                parts=self._bot_parts,
                command_guild_id=self.settings.guild_id,
                connector=connector,
                guild_ready_timeout=0.1 if emulator is not None else 2.0,
            )
        return ShardedVoiceBot(
            parts=self._bot_parts,
            command_guild_id=self.settings.guild_id,
            connector=connector,
            guild_ready_timeout=0.1 if emulator is not None else 2.0,
            shard_ids=shards.ids,
            shard_count=shards.count,
        )

    def _bot_parts(self, client: discord.Client) -> BotParts:
        """The client's parts, wired: the action plane posts through ``client`` and reads the joined
        sessions; each session gets the plane's broker from the factory."""
        sessions = VoiceSessions()
        plane = None
        if self.actions is not None:
            plane = ActionPlane(
                store=self.actions.store,
                workspaces=self.actions.workspaces,
                broker=self.actions.broker,
                agent=self.actions.agent,
                channel=DiscordControlChannel(client),
                voice=sessions,
                bus=self.bus,
                clock=self.clock,
                leases=self.actions.leases,
                remote_poll_s=self.actions.remote_poll_s,
            )
        broker = plane.broker if plane is not None else None
        factory = SessionFactory(
            bus=self.bus,
            clock=self.clock,
            options=session_options(self.settings),
            providers=self.providers,
            broker=broker,
            action_channel_id=self.actions.channel_id if self.actions is not None else None,
            records=self.records,
        )
        voice = VoiceService(sessions=sessions, factory=factory)
        meeting = MeetingRecords(
            self.records.transcripts if self.records is not None else None,
            chat=self.providers.chat,
            summary_chars=self.settings.transcript_summary_chars,
        )
        commands = VoiceCommands(
            voice,
            broker=broker,
            bus=self.bus,
            clock=self.clock,
            meeting=meeting,
            memory=self.records.memory if self.records is not None else None,
            operator_id=self.settings.operator_user_id,
        )
        audience = AudienceFeed(bus=self.bus, clock=self.clock)
        return BotParts(voice=voice, commands=commands, actions=plane, audience=audience)

    async def aclose(self) -> None:
        """Close what :func:`build_app` built (nothing when ``owns`` is False). Idempotent."""
        if not self.owns:
            return
        self.owns = False
        await self.providers.aclose()
        if self.actions is not None:
            self.actions.store.close()
        if self.records is not None:
            self.records.close()

    async def __aenter__(self) -> Application:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def build_app(
    settings: Settings, *, bus: EventBus, clock: Clock, environ: Mapping[str, str] | None = None
) -> Application:
    """Build the providers (loads models) and, when actions are on, migrate the store.

    Args:
        environ: where allowlisted agent variables are read from (default: the process environment).

    Raises:
        ProviderUnavailable: a configured provider cannot start.
        StoreError: the database is unreachable or cannot be migrated.
    """
    providers = build_providers(settings)
    actions = build_action_parts(settings, clock=clock, environ=environ)
    records = build_record_parts(settings)
    return Application(
        settings=settings,
        bus=bus,
        clock=clock,
        providers=providers,
        actions=actions,
        records=records,
        owns=True,
    )


def bot_token(settings: Settings) -> str:
    if settings.discord_token is None:
        raise ConfigError(
            "DISCORD_TOKEN or DISCORD_TOKEN_FILE is required for `run`", setting="DISCORD_TOKEN"
        )
    return settings.discord_token.get_secret_value()


async def run_bot(settings: Settings, *, bus: EventBus | None = None) -> None:
    """``openab-voice run``: the bot on real Discord until interrupted.

    Args:
        bus: the bus its observers (the terminal reporter) already listen on.
    """
    token = bot_token(settings)
    shard_range(settings)  # a pod without a shard range fails here, before the models load
    clock = SystemClock()
    bus = bus or EventBus()
    check_providers(settings, bus=bus, clock=clock)
    async with build_app(settings, bus=bus, clock=clock) as app:
        await probe_engine(app.providers, bus=bus, clock=clock)
        bot = app.create_bot()
        async with bot:
            await bot.start(token)
