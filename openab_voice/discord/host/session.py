"""One voice connection: the discord.py voice client with our receiver hooked in, and the parts the
composition root built for it (front end, playback, transcriber, transcript desk, conversation, task
phrase intake), already wired to each other by direct calls; the session starts and closes them.

The session also lives through its connection's gaps (``docs/voice-session-life.md``): when the
connection breaks (:class:`~openab_voice.discord.wire.reconnect.VoiceLife`) it stops the bot's speech at
the played position, cuts every receive stream and ends each speaker's speech in progress where the
gap began, rejoins when the session is gone, and reports the gap with its cause and duration
(:class:`~openab_voice.bus.events.VoiceGapStarted`, :class:`~openab_voice.bus.events.VoiceGap`)
once media can flow again: op 9 after a RESUME, op 4 on a new session (and the DAVE group's keys,
with DAVE on)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord

from openab_voice.actions.intake import TaskPhraseIntake
from openab_voice.audio.frontend import FrontEnd
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, wait_for
from openab_voice.discord.host.voice_status import VoiceStatus
from openab_voice.discord.wire.events import (
    DaveStateChanged,
    SpeakerLeft,
    VoiceConnected,
    VoiceDisconnected,
    VoiceGap,
)
from openab_voice.discord.wire.gaps import GapLog
from openab_voice.discord.wire.playback import Playback
from openab_voice.discord.wire.receiver import VoiceReceiver
from openab_voice.discord.wire.reconnect import Recovery
from openab_voice.discord.wire.voice_client import (
    OP_DAVE_EXECUTE_TRANSITION,
    OP_DAVE_PREPARE_EPOCH,
    ReceivingVoiceClient,
    receiving_voice_client,
)
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.expiry import SpeechCause
from openab_voice.lifecycle import Lifecycle
from openab_voice.memory.intake import RememberIntake
from openab_voice.memory.recorder import TranscriptRecorder
from openab_voice.stt.transcriber import Transcriber

log = logging.getLogger(__name__)

GAP_REASON = "voice_gap"  # SpeechEnded.reason / AudioPipelineStopped.reason of speech cut by a gap
_REJOIN_ATTEMPTS = 3
_REJOIN_BACKOFF_S = 0.5


class VoiceSession:
    """Owns everything tied to one joined voice channel, built ready by the session factory
    (:class:`openab_voice.app.sessions.SessionFactory`), and closes it all. Close is idempotent.

    Args:
        session_id: the session's random id, stamped on its events.
        generation: bumped by the service on every join: an action proposed in an earlier session
            is stale.
        channel: the voice channel it joins.
        receiver: decoded audio goes from the receive worker into ``frontend``.
        playback: the bot's voice, when playback is on; what it plays is the front end's render
            reference (echo cancellation, echo gate).
        transcriber: when transcription is on (the default); it is fed the front end's marked
            capture (frames and speech marks in band) and hands what it recognizes to ``desk``.
        desk: routes the transcripts to the intakes, then the conversation (direct calls).
        conversation: when the spoken dialogue is on.
        intake: the task phrase path, when actions are on and there is a control channel.
        recorder: stores the transcript, when ``OPENAB_TRANSCRIPT_STORE`` is on.
        remember: the spoken "remember that ..." path, when long-term memory is on.
        voice_status: the channel's status line, when ``OPENAB_VOICE_STATUS`` is on; set once the
            voice connection is up, cleared first on close (while still connected).
    """

    def __init__(
        self,
        *,
        session_id: str,
        generation: int,
        channel: discord.VoiceChannel | discord.StageChannel,
        bus: EventBus,
        clock: Clock,
        receiver: VoiceReceiver,
        frontend: FrontEnd,
        playback: Playback | None = None,
        transcriber: Transcriber | None = None,
        desk: TranscriptDesk | None = None,
        conversation: ConversationManager | None = None,
        intake: TaskPhraseIntake | None = None,
        recorder: TranscriptRecorder | None = None,
        remember: RememberIntake | None = None,
        voice_status: VoiceStatus | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        self.id = session_id
        self.generation = generation
        self.channel = channel
        self.receiver = receiver
        self.frontend = frontend
        self.playback = playback
        self.transcriber = transcriber
        self.desk = desk if desk is not None else TranscriptDesk()
        self.conversation = conversation
        self.intake = intake
        self.recorder = recorder
        self.remember = remember
        self.voice_status = voice_status
        self._bus = bus
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._left = bus.subscribe(SpeakerLeft, self._on_speaker_left)
        self.voice_client: ReceivingVoiceClient | None = None
        self._life = Lifecycle("voice session", started=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gaps = GapLog(bus=bus, clock=clock, session_id=session_id, guild_id=str(channel.guild.id))
        self._rejoin_task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        channel = self.channel
        loop = self._loop = asyncio.get_running_loop()
        self._bus.bind_loop(loop)
        self.receiver.start(loop)
        self.frontend.start()
        vc = await self._open_voice()
        if self.playback is not None:
            self.playback.attach(vc, loop)
        if self.recorder is not None:
            await self.recorder.start()  # before the transcriber: no final goes unrecorded
        if self.transcriber is not None:
            self.transcriber.start(self.frontend.subscribe_marked())
        if self.conversation is not None:
            await self.conversation.start()
        if self.voice_status is not None:
            self.voice_status.start()
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

    async def _open_voice(self) -> ReceivingVoiceClient:
        vc = await self.channel.connect(
            cls=receiving_voice_client(self.receiver, self._on_voice_op, life=self, clock=self._clock),
            timeout=self._connect_timeout_s,  # discord.py's own bound on its handshake (the loop's clock)
            self_deaf=False,
        )
        assert isinstance(vc, ReceivingVoiceClient)
        self.voice_client = vc
        return vc

    # --- the connection's life (VoiceLife; event loop) ---------------------------------------

    @property
    def gaps(self) -> list[VoiceGap]:
        """Every gap so far, oldest first (``/voice status``, tests)."""
        return self._gaps.closed

    def voice_lost(self, *, cause: str, close_code: int | None, recovery: Recovery) -> None:
        """The voice connection broke: stop speaking, cut every receive stream, report the gap.
        A second call in the same gap (a refused RESUME) only escalates its recovery."""
        if self._life.closed:
            return
        gap = self._gaps.open(cause, close_code, recovery)
        if gap is not None and self.playback is not None:
            # What was sent before the gap is what was heard: the utterance counts as interrupted
            # at its played position (only heard text enters the context).
            gap.playback_interrupted = self.playback.interrupt() is not None
        new_session = recovery in (Recovery.REJOIN, Recovery.RECONNECT)
        self._gaps.expect_cut()
        self.receiver.cut_streams(new_session=new_session, then=self._streams_cut)

    def rejoin_needed(self, *, cause: str, close_code: int | None) -> None:
        if self._life.closed:
            return
        gap = self._gaps.voice
        if gap is None or gap.recovery is not Recovery.REJOIN:
            self.voice_lost(cause=cause, close_code=close_code, recovery=Recovery.REJOIN)
        if self._rejoin_task is None or self._rejoin_task.done():
            self._rejoin_task = asyncio.get_running_loop().create_task(self._rejoin(), name="voice-rejoin")

    def voice_failed(self, reason: str) -> None:
        log.warning("voice connection of %s ended: %s", self.channel.name, reason)
        self._gaps.close(recovered=False)

    def gateway_lost(self) -> None:
        """The main gateway dropped (discord.py's ``on_disconnect``): voice flows on its own
        connection, so nothing is cut; the gap in control events is reported when it resumes."""
        if not self._life.closed:
            self._gaps.open_gateway()

    def gateway_resumed(self) -> None:
        """The main gateway is back (discord.py's ``on_resumed``)."""
        self._gaps.close_gateway()

    def _streams_cut(self, speakers: tuple[str, ...]) -> None:
        """Receive worker thread: the streams' last frames went to the front end; end their speech."""
        ended = self.frontend.break_capture(GAP_REASON)
        cut = tuple(sorted(set(speakers) | set(ended)))
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._gaps.add_cut, cut)

    async def _rejoin(self) -> None:
        """A new voice session: leave the old one (discord.py confirms it), join again."""
        old, self.voice_client = self.voice_client, None
        if old is not None:
            await self._disconnect(old, "the broken voice connection did not close cleanly")
        delay = _REJOIN_BACKOFF_S
        for attempt in range(1, _REJOIN_ATTEMPTS + 1):
            if self._life.closed:
                return
            if self._gaps.voice is not None:
                self._gaps.voice.attempts = attempt
            try:
                vc = await self._open_voice()
            except (TimeoutError, discord.DiscordException, OSError) as exc:
                log.warning("voice rejoin attempt %d failed: %r", attempt, exc)
                await self._clock.sleep(delay)
                delay *= 2
                continue
            if self.playback is not None and self._loop is not None:
                self.playback.attach(vc, self._loop)
            if vc.dave_ready:
                self._gaps.recovered()  # else when the DAVE group's transition executes
            return
        self._gaps.close(recovered=False)
        self._bus.publish(
            VoiceDisconnected(
                at=self._clock.monotonic(),
                session_id=self.id,
                guild_id=str(self.channel.guild.id),
                channel_id=str(self.channel.id),
                reason="lost",
            )
        )

    async def say(self, text: str, *, cause: SpeechCause | None = None) -> bool:
        """Speak a status line when the dialogue is on (after what is playing); False otherwise.

        ``cause``: until when the line is true; it is dropped instead of said once that expired.
        """
        if self.conversation is None:
            return False
        self.conversation.announce(text, cause=cause)
        return True

    async def _disconnect(self, vc: ReceivingVoiceClient, warning: str) -> None:
        """Stop receiving and leave the voice channel within 5 s; a failure only logs ``warning``."""
        vc.stop_listening()
        try:
            await wait_for(self._clock, 5.0, vc.disconnect(force=True))
        except (TimeoutError, discord.DiscordException):
            log.warning(warning)

    def listeners(self) -> frozenset[int]:
        """Everyone in the voice channel but the bot itself, other bots included."""
        me = self.channel.guild.me.id
        return frozenset(m.id for m in self.channel.members if m.id != me)

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

    def _on_voice_op(self, vc: ReceivingVoiceClient, op: int, data: dict[str, Any]) -> None:
        self._gaps.on_voice_op(vc, op)
        if op in (OP_DAVE_EXECUTE_TRANSITION, OP_DAVE_PREPARE_EPOCH):
            session = vc._connection.dave_session
            enabled = vc._connection.dave_protocol_version > 0
            code = vc.voice_privacy_code if enabled else None
            self._bus.publish(
                DaveStateChanged(
                    at=self._clock.monotonic(),
                    session_id=self.id,
                    enabled=enabled,
                    privacy_code=code or None,
                    epoch=getattr(session, "epoch", None),
                )
            )

    def status(self) -> dict[str, Any]:
        """What ``/voice status`` shows: channel, DAVE, per-speaker counters."""
        snap = self.receiver.snapshot()
        return {
            "channel": self.channel.name,
            "channel_id": str(self.channel.id),
            "connected": self.voice_client is not None and self.voice_client.is_connected(),
            "dave": {"enabled": self.dave_enabled, "privacy_code": self.privacy_code},
            "playback_enabled": self.playback is not None,
            "audio": {
                "apm": self.frontend.settings.apm_provider,
                "vad": self.frontend.settings.vad_provider,
                "degraded": list(self.frontend.degraded_reasons),
            },
            "voice_status": self.voice_status.snapshot() if self.voice_status is not None else None,
            "speakers": snap.get("speakers", {}),
            "unattributed": snap.get("unattributed", {}),
            "gaps": [
                {
                    "cause": g.cause,
                    "recovery": g.recovery,
                    "duration_s": g.duration_s,
                    "recovered": g.recovered,
                }
                for g in self.gaps[-5:]
            ],
        }

    async def aclose(self, reason: str = "leave") -> None:
        if not self._life.begin_close():
            return
        if self._rejoin_task is not None and not self._rejoin_task.done():
            self._rejoin_task.cancel()
            await asyncio.wait({self._rejoin_task})
        if self.voice_status is not None:
            await self.voice_status.aclose()  # cleared while the bot is still in the channel
        self.desk.close()  # what the transcriber still finishes is observed, not acted on
        if self.intake is not None:
            await self.intake.aclose()
        if self.remember is not None:
            await self.remember.aclose()
        if self.conversation is not None:
            await self.conversation.aclose()
        if self.transcriber is not None:
            await self.transcriber.aclose()
        if self.recorder is not None:
            await self.recorder.aclose()  # after the last final and the bot's last utterance
        if self.playback is not None:
            await self.playback.aclose()
        vc = self.voice_client
        if vc is not None:
            await self._disconnect(vc, "voice disconnect did not complete cleanly")
        await self.receiver.aclose()  # publishes the final ReceiveStatsUpdated
        await self.frontend.aclose()
        self._left.close()
        self._bus.publish(
            VoiceDisconnected(
                at=self._clock.monotonic(),
                session_id=self.id,
                guild_id=str(self.channel.guild.id),
                channel_id=str(self.channel.id),
                reason=reason,
            )
        )
        self._life.finish_close()
