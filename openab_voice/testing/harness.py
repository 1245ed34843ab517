"""The real bot, joined through ``/voice join`` to a voice channel of a loopback emulator.

Used by ``openab-voice demo`` and by end-to-end tests (ours and users')::

    async with BotOnEmulator(settings, EmulatorConfig(dave=True), users={1001: "alice"}) as h:
        await h.emulator.speaker(1001).say(pcm)
        h.recorder.track("1001")
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

from openab_voice.actions.plane import ActionPlane
from openab_voice.app import ActionParts, Application
from openab_voice.app.records import RecordParts
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings
from openab_voice.discord.host.bot import VoiceBot
from openab_voice.discord.host.session import VoiceSession
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig
from openab_voice.testing.recorder import Recorder

TIMEOUT_S = 30.0


class BotOnEmulator:
    """Start emulator + bot, join voice via the slash command, record what the bot hears; close on exit
    what it started (the bot and the emulator). The providers and action parts stay their builder's
    to close.

    Args:
        providers: shared by the bot's sessions (default: none, so receive only).
        actions: the action plane's parts (:func:`~openab_voice.app.build_action_parts`); the bot
            builds the plane on them (:attr:`actions`).
        records: the record plane's parts (:func:`~openab_voice.app.records.build_record_parts`):
            the ToolRouter's audit and the stored transcripts.
    """

    def __init__(
        self,
        settings: Settings,
        config: EmulatorConfig,
        *,
        users: dict[int, str],
        clock: Clock | None = None,
        bus: EventBus | None = None,
        providers: ConversationProviders | None = None,
        actions: ActionParts | None = None,
        records: RecordParts | None = None,
    ) -> None:
        if not users:
            raise EmulatorError(
                "at least one user is needed to invoke /voice join", code=ErrorCode.EMULATOR_NO_USERS
            )
        self.settings = settings
        self.clock = clock or SystemClock()
        self.bus = bus or EventBus()
        self.app = Application(
            settings=settings,
            bus=self.bus,
            clock=self.clock,
            providers=providers if providers is not None else ConversationProviders(),
            actions=actions,
            records=records,
        )
        self.emulator = DiscordEmulator(config, clock=self.clock)
        self.users = dict(users)
        for uid, name in users.items():
            self.emulator.add_user(uid, name)
        self._bot: VoiceBot | None = None
        self._bot_task: asyncio.Task[None] | None = None
        self._recorder_task: asyncio.Task[None] | None = None
        self._session: VoiceSession | None = None
        self.recorder = Recorder(0.0)
        self.origin = 0.0
        self.join_reply: str | None = None

    @classmethod
    def on(cls, app: Application, config: EmulatorConfig, *, users: dict[int, str]) -> BotOnEmulator:
        """The bot of ``app`` (built by :func:`~openab_voice.app.build_app`, which keeps owning its
        parts) on a new emulator."""
        return cls(
            app.settings,
            config,
            users=users,
            clock=app.clock,
            bus=app.bus,
            providers=app.providers,
            actions=app.actions,
            records=app.records,
        )

    @property
    def bot(self) -> VoiceBot:
        assert self._bot is not None, "not started"
        return self._bot

    @property
    def actions(self) -> ActionPlane | None:
        """The bot's action plane (None when actions are off)."""
        return self.bot.actions

    @property
    def session(self) -> VoiceSession:
        assert self._session is not None, "not joined"
        return self._session

    async def __aenter__(self) -> BotOnEmulator:
        try:
            await self._start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _start(self) -> None:
        self.bus.bind_loop(asyncio.get_running_loop())
        await self.emulator.start()
        self._bot = self.app.create_bot(emulator=self.emulator)
        await self._bot.login(self.emulator.token)
        self._bot_task = asyncio.create_task(self._bot.connect(reconnect=False), name="discord-bot")
        await self._wait(self._bot.wait_until_ready(), "the bot did not become ready")
        interaction = await self.emulator.invoke_command(
            next(iter(self.users)),
            "voice",
            subcommand="join",
            options={"channel": self.emulator.voice_channel_id},
        )
        self._session = await self._wait(
            self._bot.voice.wait_joined(self.emulator.guild_id), "the bot did not join"
        )
        await self.emulator.wait_voice_ready(timeout=TIMEOUT_S)
        self.join_reply = await self._wait(interaction.response(), "no reply to /voice join")
        self.origin = self.clock.monotonic()
        self.recorder = Recorder(self.origin)
        self._recorder_task = asyncio.create_task(
            self.recorder.consume(self._session.receiver.subscribe()), name="recorder"
        )

    async def _wait(self, aw: Any, what: str) -> Any:
        bot_task = self._bot_task
        waiter = asyncio.ensure_future(aw)
        pending = {waiter} | ({bot_task} if bot_task is not None else set())
        done, _ = await asyncio.wait(pending, timeout=TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        if waiter in done:
            return waiter.result()
        waiter.cancel()
        if bot_task is not None and bot_task in done and bot_task.exception() is not None:
            raise EmulatorError(f"{what}: {bot_task.exception()!r}", code=ErrorCode.EMULATOR_BOT_FAILED)
        raise EmulatorError(what, code=ErrorCode.EMULATOR_TIMEOUT)

    async def at(self, seconds: float) -> None:
        """Sleep until ``seconds`` after the voice connection became ready."""
        await self.clock.sleep(self.origin + seconds - self.clock.monotonic())

    async def command(self, subcommand: str, *, user_id: int | None = None, **options: Any) -> str:
        """Invoke ``/voice <subcommand>`` as a user and return the bot's reply text."""
        interaction = await self.emulator.invoke_command(
            user_id or next(iter(self.users)), "voice", subcommand=subcommand, options=options or None
        )
        reply: str = await self._wait(interaction.response(), f"no reply to /voice {subcommand}")
        return reply

    async def aclose(self) -> None:
        """Leave, stop the bot and the emulator. Idempotent."""
        if self._recorder_task is not None:
            self._recorder_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._recorder_task
            self._recorder_task = None
        if self._bot is not None:
            await self._bot.close()
            self._bot = None
        if self._bot_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._bot_task
            self._bot_task = None
        await self.emulator.aclose()
