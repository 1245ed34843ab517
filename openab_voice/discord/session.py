"""One voice connection: discord.py voice client + receiver + (opt-in) playback, and its status."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any

import discord

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.intake import TaskPhraseIntake
from openab_voice.actions.tools import SessionFacts, register_action_tools
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.bus.events import DaveStateChanged, SpeakerLeft, VoiceConnected, VoiceDisconnected
from openab_voice.clock import Clock
from openab_voice.discord.playback import Playback
from openab_voice.discord.receiver import ReceiverSettings, VoiceReceiver
from openab_voice.discord.roster import ChannelRoster
from openab_voice.discord.voice_client import (
    OP_DAVE_EXECUTE_TRANSITION,
    OP_DAVE_PREPARE_EPOCH,
    ReceivingVoiceClient,
    receiving_voice_client,
)
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.transcriber import Transcriber
from openab_voice.tools.registry import default_tools

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    receiver: ReceiverSettings
    frontend: FrontEndSettings
    playback_enabled: bool
    playback_buffer_ms: int
    connect_timeout_s: float = 30.0


class VoiceSession:
    """Owns everything tied to one joined voice channel. Close is idempotent."""

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        options: SessionOptions,
        providers: ConversationProviders | None = None,
        generation: int = 0,
        broker: ActionBroker | None = None,
        text_channel_id: int | None = None,
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        # Bumped by the service on every join: an action proposed in an earlier session is stale.
        self.generation = generation
        self._broker = broker
        self._text_channel_id = text_channel_id
        self.intake: TaskPhraseIntake | None = None
        self._providers = providers or ConversationProviders()
        self.transcriber: Transcriber | None = None
        self.conversation: ConversationManager | None = None
        self._bus = bus
        self._clock = clock
        self._options = options
        self.receiver = VoiceReceiver(bus=bus, clock=clock, settings=options.receiver, session_id=self.id)
        self.playback: Playback | None = (
            Playback(bus=bus, clock=clock, buffer_ms=options.playback_buffer_ms, session_id=self.id)
            if options.playback_enabled
            else None
        )
        # Decoded audio goes from the receive worker straight into the front end; what the bot plays
        # is the front end's render reference (echo cancellation, echo gate).
        self.frontend = FrontEnd(options.frontend, bus=bus, clock=clock, session_id=self.id)
        self.receiver.add_frame_sink(self.frontend.push_capture)
        self.receiver.add_watermark_sink(self.frontend.advance_capture_watermark)
        if self.playback is not None:
            self.playback.add_render_sink(self.frontend.push_render)
        self._left = bus.subscribe(SpeakerLeft, self._on_speaker_left)
        self.voice_client: ReceivingVoiceClient | None = None
        self.channel: discord.VoiceChannel | discord.StageChannel | None = None
        self._closed = False

    async def connect(self, channel: discord.VoiceChannel | discord.StageChannel) -> None:
        loop = asyncio.get_running_loop()
        self._bus.bind_loop(loop)
        self.receiver.start(loop)
        self.frontend.start()
        self.channel = channel
        vc = await channel.connect(
            cls=receiving_voice_client(self.receiver, self._on_voice_op),
            timeout=self._options.connect_timeout_s,
            self_deaf=False,
        )
        assert isinstance(vc, ReceivingVoiceClient)
        self.voice_client = vc
        if self.playback is not None:
            self.playback.attach(vc, loop)
        await self._start_conversation(channel, vc, self._start_actions(channel))
        self._bus.publish(
            VoiceConnected(
                at=self._clock.monotonic(),
                session_id=self.id,
                guild_id=str(channel.guild.id),
                channel_id=str(channel.id),
                channel_name=channel.name,
                dave_enabled=self.dave_enabled,
                privacy_code=self.privacy_code,
                transport_mode=str(vc.mode),
            )
        )

    def _start_actions(self, channel: discord.VoiceChannel | discord.StageChannel) -> SessionFacts | None:
        """The task phrase path and the semantic tools' facts, when actions are on and there is a control
        channel. The phrase needs transcripts: without a transcriber nothing ever matches."""
        if self._broker is None or self._text_channel_id is None:
            return None
        facts = SessionFacts(
            guild_id=channel.guild.id,
            voice_channel_id=channel.id,
            text_channel_id=self._text_channel_id,
            generation=self.generation,
            session_id=self.id,
        )
        dialogue = self._providers.dialogue
        configured = dialogue.wake_name if dialogue is not None else None

        def wake_name() -> str | None:
            return configured or channel.guild.me.display_name

        async def say(text: str, *, cause: SpeechCause | None = None) -> None:
            await self.say(text, cause=cause)

        self.intake = TaskPhraseIntake(
            broker=self._broker, bus=self._bus, facts=facts, session_id=self.id, wake_name=wake_name, say=say
        )
        return facts

    async def say(self, text: str, *, cause: SpeechCause | None = None) -> bool:
        """Speak a status line when the dialogue is on (after what is playing); False otherwise.

        ``cause``: until when the line is true; it is dropped instead of said once that expired.
        """
        if self.conversation is None:
            return False
        self.conversation.announce(text, cause=cause)
        return True

    def listeners(self) -> frozenset[int]:
        """Everyone in the voice channel but the bot itself, other bots included."""
        channel = self.channel
        if channel is None:
            return frozenset()
        me = channel.guild.me.id
        return frozenset(m.id for m in channel.members if m.id != me)

    async def _start_conversation(
        self,
        channel: discord.VoiceChannel | discord.StageChannel,
        vc: ReceivingVoiceClient,
        facts: SessionFacts | None,
    ) -> None:
        """Transcription (default) and, when configured, the spoken dialogue for this channel."""
        providers = self._providers
        if providers.stt is None:
            return
        self.transcriber = Transcriber(
            providers.stt,
            bus=self._bus,
            clock=self._clock,
            settings=providers.transcriber,
            session_id=self.id,
        )
        self.transcriber.start(self.frontend.subscribe())
        if (
            providers.dialogue is None
            or providers.chat is None
            or providers.tts is None
            or self.playback is None
        ):
            return
        me = channel.guild.me
        dialogue = replace(
            providers.dialogue,
            bot_user_id=str(me.id),
            wake_name=providers.dialogue.wake_name or me.display_name,
        )
        tools = default_tools(self._clock)
        if self._broker is not None and facts is not None:
            register_action_tools(tools, self._broker, facts)
        self.conversation = ConversationManager(
            bus=self._bus,
            clock=self._clock,
            chat=providers.chat,
            tts=providers.tts,
            output=self.playback,
            tools=tools,
            roster=ChannelRoster(channel, me.id),
            settings=dialogue,
            session_id=self.id,
            claimed=self.intake.claims if self.intake is not None else None,
        )
        await self.conversation.start()

    @property
    def dave_enabled(self) -> bool:
        vc = self.voice_client
        return vc is not None and vc._connection.dave_protocol_version > 0

    @property
    def privacy_code(self) -> str | None:
        vc = self.voice_client
        if vc is None or not self.dave_enabled:
            return None
        code = vc.voice_privacy_code
        return code or None

    def _on_speaker_left(self, event: SpeakerLeft) -> None:
        if event.session_id == self.id:
            self.frontend.remove_speaker(event.speaker_id)
            if self.transcriber is not None:
                self.transcriber.remove_speaker(event.speaker_id)

    def _on_voice_op(self, op: int, data: dict[str, Any]) -> None:
        if op in (OP_DAVE_EXECUTE_TRANSITION, OP_DAVE_PREPARE_EPOCH) and self.voice_client is not None:
            session = self.voice_client._connection.dave_session
            self._bus.publish(
                DaveStateChanged(
                    at=self._clock.monotonic(),
                    session_id=self.id,
                    enabled=self.dave_enabled,
                    privacy_code=self.privacy_code,
                    epoch=getattr(session, "epoch", None),
                )
            )

    def status(self) -> dict[str, Any]:
        """What ``/voice status`` shows: channel, DAVE, per-speaker counters."""
        snap = self.receiver.snapshot()
        return {
            "channel": self.channel.name if self.channel else None,
            "channel_id": str(self.channel.id) if self.channel else None,
            "connected": self.voice_client is not None and self.voice_client.is_connected(),
            "dave": {"enabled": self.dave_enabled, "privacy_code": self.privacy_code},
            "playback_enabled": self.playback is not None,
            "audio": {
                "apm": self.frontend.settings.apm_provider,
                "vad": self.frontend.settings.vad_provider,
                "degraded": list(self.frontend.degraded_reasons),
            },
            "speakers": snap.get("speakers", {}),
            "unattributed": snap.get("unattributed", {}),
        }

    async def aclose(self, reason: str = "leave") -> None:
        if self._closed:
            return
        self._closed = True
        if self.intake is not None:
            await self.intake.aclose()
        if self.conversation is not None:
            await self.conversation.aclose()
        if self.transcriber is not None:
            await self.transcriber.aclose()
        if self.playback is not None:
            await self.playback.aclose()
        vc = self.voice_client
        if vc is not None:
            vc.stop_listening()
            try:
                await asyncio.wait_for(vc.disconnect(force=True), timeout=5.0)
            except (TimeoutError, discord.DiscordException):
                log.warning("voice disconnect did not complete cleanly")
        await self.receiver.aclose()  # publishes the final ReceiveStatsUpdated
        await self.frontend.aclose()
        self._left.close()
        self._bus.publish(
            VoiceDisconnected(
                at=self._clock.monotonic(),
                session_id=self.id,
                guild_id=str(self.channel.guild.id) if self.channel else "",
                channel_id=str(self.channel.id) if self.channel else None,
                reason=reason,
            )
        )
