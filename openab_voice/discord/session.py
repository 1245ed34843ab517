"""One voice connection: the discord.py voice client with our receiver hooked in, and the parts the
composition root built for it (front end, playback, transcriber, conversation, task phrase intake)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord

from openab_voice.actions.intake import TaskPhraseIntake
from openab_voice.audio.frontend import FrontEnd
from openab_voice.bus import EventBus
from openab_voice.bus.events import DaveStateChanged, SpeakerLeft, VoiceConnected, VoiceDisconnected
from openab_voice.clock import Clock
from openab_voice.discord.playback import Playback
from openab_voice.discord.receiver import VoiceReceiver
from openab_voice.discord.voice_client import (
    OP_DAVE_EXECUTE_TRANSITION,
    OP_DAVE_PREPARE_EPOCH,
    ReceivingVoiceClient,
    receiving_voice_client,
)
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.transcriber import Transcriber
from openab_voice.memory.intake import RememberIntake
from openab_voice.memory.recorder import TranscriptRecorder

log = logging.getLogger(__name__)


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
        transcriber: when transcription is on (the default).
        conversation: when the spoken dialogue is on.
        intake: the task phrase path, when actions are on and there is a control channel.
        recorder: stores the transcript, when ``OPENAB_TRANSCRIPT_STORE`` is on.
        remember: the spoken "remember that ..." path, when long-term memory is on.
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
        conversation: ConversationManager | None = None,
        intake: TaskPhraseIntake | None = None,
        recorder: TranscriptRecorder | None = None,
        remember: RememberIntake | None = None,
        connect_timeout_s: float = 30.0,
    ) -> None:
        self.id = session_id
        self.generation = generation
        self.channel = channel
        self.receiver = receiver
        self.frontend = frontend
        self.playback = playback
        self.transcriber = transcriber
        self.conversation = conversation
        self.intake = intake
        self.recorder = recorder
        self.remember = remember
        self._bus = bus
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._left = bus.subscribe(SpeakerLeft, self._on_speaker_left)
        self.voice_client: ReceivingVoiceClient | None = None
        self._closed = False

    async def connect(self) -> None:
        channel = self.channel
        loop = asyncio.get_running_loop()
        self._bus.bind_loop(loop)
        self.receiver.start(loop)
        self.frontend.start()
        vc = await channel.connect(
            cls=receiving_voice_client(self.receiver, self._on_voice_op),
            timeout=self._connect_timeout_s,
            self_deaf=False,
        )
        assert isinstance(vc, ReceivingVoiceClient)
        self.voice_client = vc
        if self.playback is not None:
            self.playback.attach(vc, loop)
        if self.recorder is not None:
            await self.recorder.start()  # before the transcriber: no final goes unrecorded
        if self.transcriber is not None:
            self.transcriber.start(self.frontend.subscribe())
        if self.conversation is not None:
            await self.conversation.start()
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
            "speakers": snap.get("speakers", {}),
            "unattributed": snap.get("unattributed", {}),
        }

    async def aclose(self, reason: str = "leave") -> None:
        if self._closed:
            return
        self._closed = True
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
                guild_id=str(self.channel.guild.id),
                channel_id=str(self.channel.id),
                reason=reason,
            )
        )
