"""The session factory: everything one voice session runs, built ready when ``/voice join`` asks.

It also lays the session's data path, by direct calls (ADR 0015): the front end's marked capture to
the transcriber (started by the session), the transcriber's events to the session's
:class:`~openab_voice.engine.desk.TranscriptDesk` (intakes first, then the conversation), and the
front end's speech boundaries straight to the conversation. The bus only carries observations.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

import discord

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.claims import ActionClaims
from openab_voice.actions.intake import Say, TaskPhraseIntake
from openab_voice.actions.tools import SessionFacts, register_action_tools
from openab_voice.app.providers import frontend_settings
from openab_voice.app.records import RecordParts
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.config import Settings
from openab_voice.discord.host.session import VoiceSession
from openab_voice.discord.host.voice_status import VoiceStatus
from openab_voice.discord.wire.playback import Playback
from openab_voice.discord.wire.receiver import ReceiverSettings, VoiceReceiver
from openab_voice.discord.wire.roster import ChannelRoster
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import Intake, TranscriptDesk
from openab_voice.engine.duplex import EngineFactory
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.live import LiveSettings, live_engine
from openab_voice.engine.realtime import RealtimeSettings, realtime_engine
from openab_voice.engine.response import ToolPath
from openab_voice.engine.turns import only_address, wake_names
from openab_voice.memory.intake import RememberIntake
from openab_voice.memory.recall import MemoryContext
from openab_voice.memory.recorder import RecorderPlace, TranscriptRecorder
from openab_voice.memory.tools import register_memory_tools
from openab_voice.providers.live import DEFAULT_LIVE_VOICE
from openab_voice.providers.realtime import DEFAULT_VOICE
from openab_voice.stt.endpointing import EndOfTurnSettings
from openab_voice.stt.redecode_stream import RedecodeRecognizer
from openab_voice.stt.transcriber import Transcriber
from openab_voice.tools.registry import ToolRegistry, default_tools
from openab_voice.tools.router import RouterSettings, ToolRouter

VoiceChannel = discord.VoiceChannel | discord.StageChannel


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """What every session is built with.

    Attributes:
        tool_router: the ToolRouter's budgets; None: the router is off
            (``OPENAB_TOOL_ROUTER_ENABLED=false``) and no tool runs.
        voice_status_interval_s: the least time between two voice channel status updates; None: the
            bot sets no status (``OPENAB_VOICE_STATUS=false``).
    """

    receiver: ReceiverSettings
    frontend: FrontEndSettings
    playback_enabled: bool
    playback_buffer_ms: int
    connect_timeout_s: float = 30.0
    tool_router: RouterSettings | None = RouterSettings()
    voice_status_interval_s: float | None = None


def session_options(settings: Settings) -> SessionOptions:
    return SessionOptions(
        frontend=frontend_settings(settings),
        receiver=ReceiverSettings(
            jitter_depth=settings.jitter_depth,
            max_conceal=settings.max_conceal_frames,
            pending_per_ssrc=settings.pending_packets_per_ssrc,
            pending_ttl_s=settings.pending_ttl_s,
            inbox_packets=settings.receive_queue_packets,
            udp_keepalive_s=settings.udp_keepalive_s,
        ),
        playback_enabled=settings.playback_enabled,
        playback_buffer_ms=settings.playback_buffer_ms,
        tool_router=router_settings(settings) if settings.tool_router_enabled else None,
        voice_status_interval_s=settings.voice_status_interval_s if settings.voice_status else None,
    )


def router_settings(settings: Settings) -> RouterSettings:
    """The ToolRouter's budgets (``OPENAB_TOOL_*``)."""
    return RouterSettings(
        max_calls_per_turn=settings.tool_max_calls_per_turn,
        max_proposals_per_turn=settings.tool_max_proposals_per_turn,
        max_runtime_s_per_turn=settings.tool_max_runtime_s_per_turn,
        max_output_chars=settings.tool_max_output_chars,
    )


class SessionFactory:
    """Builds one :class:`~openab_voice.discord.host.session.VoiceSession` with all its parts, unstarted.

    Always a receiver and the audio front end it feeds; playback when it is on (its output is the
    front end's render reference); a transcriber when there is STT; the spoken dialogue when dialogue,
    chat, TTS and playback are all there; the task phrase intake and the action tools when there is a
    broker and a control channel. The session starts and closes them.

    Args:
        providers: shared by every session (their owner closes them, not the session).
        broker: the action plane's broker (None: actions are off).
        action_channel_id: the configured control channel (None: the channel the join was asked in).
        records: the record plane (the ToolRouter's audit log); None: nothing recorded, so no tool
            runs either (the router fails closed without its audit log).
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        options: SessionOptions,
        providers: ConversationProviders,
        broker: ActionBroker | None = None,
        action_channel_id: int | None = None,
        records: RecordParts | None = None,
    ) -> None:
        self._bus = bus
        self._records = records
        self._clock = clock
        self._options = options
        self._providers = providers
        self._broker = broker
        self._action_channel_id = action_channel_id
        # The model's speech about actions is held against the store's statuses (every session's).
        self._claims = ActionClaims(bus)

    def __call__(
        self, channel: VoiceChannel, *, generation: int, text_channel_id: int | None
    ) -> VoiceSession:
        bus, clock, options = self._bus, self._clock, self._options
        session_id = uuid.uuid4().hex[:12]
        receiver = VoiceReceiver(bus=bus, clock=clock, settings=options.receiver, session_id=session_id)
        playback = (
            Playback(bus=bus, clock=clock, buffer_ms=options.playback_buffer_ms, session_id=session_id)
            if options.playback_enabled
            else None
        )
        # Decoded audio goes from the receive worker straight into the front end; what the bot plays
        # is the front end's render reference (echo cancellation, echo gate).
        frontend = FrontEnd(options.frontend, bus=bus, clock=clock, session_id=session_id)
        receiver.add_frame_sink(frontend.push_capture)
        receiver.add_watermark_sink(frontend.advance_capture_watermark)
        if playback is not None:
            playback.add_render_sink(frontend.push_render)
        facts = self._facts(channel, generation, session_id, self._action_channel_id or text_channel_id)
        stt = self._providers.stt
        conversation: ConversationManager | None = None

        async def say(text: str, *, cause: SpeechCause | None = None) -> None:
            # The acknowledgment's way out: the conversation below, if this session has one.
            if conversation is not None:
                conversation.announce(text, cause=cause)

        # The phrase needs transcripts: without a transcriber nothing ever matches.
        intake = self._intake(channel, facts, say) if facts is not None else None
        remember = self._remember(channel, say) if stt is not None else None
        if stt is not None and playback is not None:
            conversation = self._conversation(channel, playback, facts, session_id, frontend)
        # Each final: the intakes first (the task phrase, then "remember that ..."), the
        # conversation only if none took it; speech boundaries go to the conversation with their
        # frames' batch, never through the bus.
        intakes: list[Intake] = [part for part in (intake, remember) if part is not None]
        desk = TranscriptDesk(intakes, conversation)
        if conversation is not None:
            frontend.add_speech_sink(conversation.hear)
        # The wake name alone is the opening of a turn, not a turn (semantic end of turn).
        turns = replace(
            self._providers.turns or EndOfTurnSettings(),
            vocative=lambda text: only_address(text, self._wake_name(channel)),
        )
        transcriber = (
            Transcriber(
                RedecodeRecognizer(
                    stt,
                    clock=clock,
                    settings=self._providers.transcriber,
                    turn_detector=self._providers.turn_detector,
                    turns=turns,
                ),
                bus=bus,
                session_id=session_id,
                sink=desk.route,
            )
            if stt is not None
            else None
        )
        return VoiceSession(
            session_id=session_id,
            generation=generation,
            channel=channel,
            bus=bus,
            clock=clock,
            receiver=receiver,
            frontend=frontend,
            playback=playback,
            transcriber=transcriber,
            desk=desk,
            conversation=conversation,
            intake=intake,
            recorder=self._recorder(channel, session_id),
            remember=remember,
            voice_status=self._voice_status(channel, session_id),
            connect_timeout_s=options.connect_timeout_s,
        )

    def _voice_status(self, channel: VoiceChannel, session_id: str) -> VoiceStatus | None:
        """The channel's status line, when ``OPENAB_VOICE_STATUS`` is on (a stage channel has none)."""
        interval_s = self._options.voice_status_interval_s
        if interval_s is None or not isinstance(channel, discord.VoiceChannel):
            return None
        voice_channel = channel

        async def send(status: str | None) -> None:
            await voice_channel.edit(status=status)  # PUT /channels/{id}/voice-status

        return VoiceStatus(
            send,
            bus=self._bus,
            clock=self._clock,
            session_id=session_id,
            interval_s=interval_s,
        )

    def _wake_name(self, channel: VoiceChannel) -> str:
        """What addresses the bot: the configured wake name, or its name in the guild."""
        dialogue = self._providers.dialogue
        return (dialogue.wake_name if dialogue is not None else None) or channel.guild.me.display_name

    def _recorder(self, channel: VoiceChannel, session_id: str) -> TranscriptRecorder | None:
        """The transcript recorder, when transcripts are stored."""
        records = self._records
        if records is None or records.transcripts is None:
            return None
        me = channel.guild.me

        def audience() -> frozenset[int]:
            return frozenset(m.id for m in channel.members if m.id != me.id)

        place = RecorderPlace(
            guild_id=channel.guild.id,
            channel_id=channel.id,
            channel_name=channel.name,
            bot_id=str(me.id),
            bot_name=lambda: (wake_names(self._wake_name(channel)) or ("bot",))[0],
            audience=audience,
            name_of=_names(channel),
        )
        return TranscriptRecorder(
            records.transcripts,
            bus=self._bus,
            clock=self._clock,
            session_id=session_id,
            place=place,
            retention_s=records.retention_s,
        )

    def _facts(
        self, channel: VoiceChannel, generation: int, session_id: str, text_channel_id: int | None
    ) -> SessionFacts | None:
        """The trusted facts actions are proposed with; None when actions are off or have no channel."""
        if self._broker is None or text_channel_id is None:
            return None
        return SessionFacts(
            guild_id=channel.guild.id,
            voice_channel_id=channel.id,
            text_channel_id=text_channel_id,
            generation=generation,
            session_id=session_id,
        )

    def _intake(self, channel: VoiceChannel, facts: SessionFacts, say: Say) -> TaskPhraseIntake:
        assert self._broker is not None  # facts exist only with a broker
        return TaskPhraseIntake(
            broker=self._broker,
            bus=self._bus,
            facts=facts,
            wake_name=lambda: self._wake_name(channel),
            say=say,
        )

    def _conversation(
        self,
        channel: VoiceChannel,
        playback: Playback,
        facts: SessionFacts | None,
        session_id: str,
        frontend: FrontEnd | None = None,
    ) -> ConversationManager | None:
        """The spoken dialogue, when the dialogue and its engine (chat model and TTS, or the realtime or
        live provider) are configured."""
        providers = self._providers
        cascade = providers.chat is not None and providers.tts is not None
        speech_to_speech = providers.realtime is not None or providers.live is not None
        if providers.dialogue is None or not (cascade or speech_to_speech):
            return None
        me = channel.guild.me
        dialogue = replace(
            providers.dialogue,
            bot_user_id=str(me.id),
            wake_name=providers.dialogue.wake_name or me.display_name,
        )
        registry = default_tools(self._clock)
        if self._broker is not None and facts is not None:
            register_action_tools(registry, self._broker, facts)
        records = self._records
        if records is not None and records.memory is not None:
            register_memory_tools(
                registry, records.memory, guild_id=channel.guild.id, top_k=records.memory_top_k
            )
        tools = self._tool_path(registry)
        return ConversationManager(
            bus=self._bus,
            clock=self._clock,
            chat=providers.chat,
            tts=providers.tts,
            output=playback,
            tools=tools,
            roster=ChannelRoster(channel, me.id),
            settings=dialogue,
            session_id=session_id,
            memory=self._memory(channel),
            engine=self._engine(playback, tools, frontend),
        )

    def _engine(self, playback: Playback, tools: ToolPath, frontend: FrontEnd | None) -> EngineFactory | None:
        """The speech-to-speech engine, when one is configured; None: the cascade. Each takes the same
        tool path as the cascade and offers its provider only the semantic action tools."""
        providers = self._providers
        capture = frontend.subscribe if frontend is not None else None
        if providers.realtime is not None:
            return realtime_engine(
                connector=providers.realtime,
                output=playback,
                tools=tools,
                capture=capture,
                settings=RealtimeSettings(voice=providers.realtime_voice or DEFAULT_VOICE),
                voice=providers.tts,
                claims=self._claims,
            )
        if providers.live is not None:
            settings = LiveSettings(voice=providers.live_voice or DEFAULT_LIVE_VOICE)
            if providers.live_backend_model is not None:
                settings = replace(settings, backend_model=providers.live_backend_model)
            return live_engine(
                connector=providers.live,
                output=playback,
                tools=tools,
                capture=capture,
                settings=settings,
                voice=providers.tts,
                claims=self._claims,
            )
        return None

    def _tool_path(self, registry: ToolRegistry) -> ToolPath:
        """The session's only tool path: the ToolRouter over ``registry``, whatever the settings. Off, it
        runs nothing (``TOOL_ROUTER_DISABLED``); without the record plane's audit log it runs nothing
        either (``TOOL_AUDIT_UNAVAILABLE``): a tool never runs unaudited."""
        records = self._records
        budgets = self._options.tool_router
        return ToolRouter(
            registry,
            clock=self._clock,
            settings=budgets,
            audit=records.tool_calls if records is not None else None,
            enabled=budgets is not None,
        )

    def _remember(self, channel: VoiceChannel, say: Say) -> RememberIntake | None:
        """The spoken "remember that ..." path, when memory is on (it needs transcripts)."""
        records = self._records
        if records is None or records.memory is None:
            return None

        async def speak(text: str) -> None:
            await say(text)

        return RememberIntake(
            records.memory,
            guild_id=channel.guild.id,
            wake_name=lambda: self._wake_name(channel),
            say=speak,
        )

    def _memory(self, channel: VoiceChannel) -> MemoryContext | None:
        """The turn's long-term memory, when memory is on."""
        records = self._records
        if records is None or records.memory is None:
            return None
        return MemoryContext(
            records.memory, guild_id=channel.guild.id, top_k=records.memory_top_k, name_of=_names(channel)
        )


def _names(channel: VoiceChannel) -> Callable[[str], str]:
    """A speaker's display name in the channel's guild from their id (the id when unknown)."""

    def name_of(user_id: str) -> str:
        member = channel.guild.get_member(int(user_id)) if user_id.isdigit() else None
        return member.display_name if member is not None else user_id

    return name_of
