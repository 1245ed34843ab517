"""Fake users in the voice channel who talk to the bot (see :mod:`rtp_stream` for the packets)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.clock import Clock
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.echo import EchoPath, EchoRenderer, RoomAudio
from openab_voice.testing.emulator.impairments import ImpairmentPlanner, Impairments
from openab_voice.testing.emulator.rtp_stream import RtpStream, SendReport, StreamOptions
from openab_voice.testing.emulator.voice_connection import VoiceConnection


class SpeakerHost(Protocol):
    """What a speaker needs from the emulator."""

    async def connection_for(self, user_id: int) -> VoiceConnection:
        """The bot's live voice connection, once ``user_id`` may send on it."""
        ...

    def send_datagram(self, data: bytes, address: tuple[str, int]) -> None: ...

    def in_voice(self, user_id: int) -> bool: ...

    async def leave_voice(self, user_id: int, *, mls_remove: bool) -> None: ...

    async def join_voice(self, user_id: int) -> None: ...


class FakeSpeaker:
    """A user in the voice channel who can talk to the bot.

    Created by ``DiscordEmulator.add_user``; not constructed directly. One utterance at a time:
    concurrent ``say`` calls of the same speaker queue up.

    Attributes:
        user_id: the Discord user id.
        name: the username.
        ssrc: the RTP SSRC of this user's audio.
    """

    def __init__(
        self,
        *,
        host: SpeakerHost,
        room: RoomAudio,
        clock: Clock,
        user_id: int,
        name: str,
        ssrc: int,
        impairments: Impairments,
        seed: int,
        rtp_start: tuple[int, int],
        speaking_lead: float = 0.0,
    ) -> None:
        self._host = host
        self._speaking_lead = speaking_lead
        self._room = room
        self.user_id = user_id
        self.name = name
        self.ssrc = ssrc
        self._impairments = impairments
        self._seed = seed
        self._utterances = 0
        self._rtp = RtpStream(clock=clock, ssrc=ssrc, rtp_start=rtp_start, send=host.send_datagram)
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"FakeSpeaker(user_id={self.user_id}, name={self.name!r}, ssrc={self.ssrc})"

    @property
    def impairments(self) -> Impairments:
        """This speaker's default impairments (the emulator's unless set)."""
        return self._impairments

    @impairments.setter
    def impairments(self, value: Impairments) -> None:
        self._impairments = value

    @property
    def in_voice(self) -> bool:
        return self._host.in_voice(self.user_id)

    async def leave(self, *, mls_remove: bool = True) -> None:
        """Leave the voice channel: op 13 to the bot, VOICE_STATE_UPDATE with ``channel_id`` null on
        the main gateway and, with DAVE on and ``mls_remove``, an MLS Remove the bot follows."""
        await self._host.leave_voice(self.user_id, mls_remove=mls_remove)

    async def join(self) -> None:
        """(Re)join the voice channel; with DAVE on, returns once the bot followed the MLS Add."""
        await self._host.join_voice(self.user_id)

    async def say(
        self,
        pcm48k_stereo: bytes,
        *,
        send_before_speaking: int = 0,
        loss: float | None = None,
        reorder: float | None = None,
        jitter_ms: float | None = None,
        echo: EchoPath | None = None,
    ) -> SendReport:
        """Stream PCM to the bot in real time (on the injected clock), DAVE-encrypted when the call is.

        Args:
            pcm48k_stereo: 48 kHz stereo s16le (see :func:`load_wav_48k_stereo`).
            send_before_speaking: send this many packets before op 5 SPEAKING (0: op 5 first).
            echo: mix in the echo of the bot's playback through this path (double talk).
            loss: override the packet loss probability.
            reorder: override the probability of swapping a packet with the next.
            jitter_ms: override the random extra delay per packet.

        Raises:
            EmulatorError: ``EMULATOR_BAD_AUDIO`` for PCM that is not whole stereo samples;
                ``EMULATOR_NOT_CONNECTED`` / ``EMULATOR_NOT_IN_VOICE`` when the bot or this user is
                not in the call; ``EMULATOR_TIMEOUT`` when the bot never finishes joining.
        """
        options = StreamOptions(
            speaking_user=self.user_id, send_before_speaking=send_before_speaking, dave_user=self.user_id
        )
        return await self._say(
            pcm48k_stereo, options, loss=loss, reorder=reorder, jitter_ms=jitter_ms, echo=echo
        )

    async def say_echo_only(self, seconds: float, echo: EchoPath) -> SendReport:
        """Send ``seconds`` of nothing but the echo of the bot's playback (a speaker with an open mic
        and no voice of their own: what must never interrupt the bot)."""
        frames = max(1, round(seconds * 50))
        options = StreamOptions(speaking_user=self.user_id, dave_user=self.user_id)
        return await self._say(
            bytes(DISCORD_FRAME_BYTES * frames), options, loss=None, reorder=None, jitter_ms=None, echo=echo
        )

    async def say_with_wrong_key(
        self,
        pcm48k_stereo: bytes,
        *,
        loss: float | None = None,
        reorder: float | None = None,
        jitter_ms: float | None = None,
    ) -> SendReport:
        """Like :meth:`say`, but every packet is sealed with a random transport key."""
        options = StreamOptions(speaking_user=self.user_id, dave_user=self.user_id, wrong_key=True)
        return await self._say(pcm48k_stereo, options, loss=loss, reorder=reorder, jitter_ms=jitter_ms)

    async def say_without_dave(
        self,
        pcm48k_stereo: bytes,
        *,
        loss: float | None = None,
        reorder: float | None = None,
        jitter_ms: float | None = None,
    ) -> SendReport:
        """Like :meth:`say`, but plain Opus even in a DAVE call (a receiver must reject it)."""
        options = StreamOptions(speaking_user=self.user_id, dave_user=None)
        return await self._say(pcm48k_stereo, options, loss=loss, reorder=reorder, jitter_ms=jitter_ms)

    async def _say(
        self,
        pcm: bytes,
        options: StreamOptions,
        *,
        loss: float | None,
        reorder: float | None,
        jitter_ms: float | None,
        echo: EchoPath | None = None,
    ) -> SendReport:
        if len(pcm) % 4:
            raise EmulatorError("PCM must be whole 16-bit stereo samples", code=ErrorCode.EMULATOR_BAD_AUDIO)
        if options.send_before_speaking < 0:
            raise EmulatorError("send_before_speaking must be >= 0", code=ErrorCode.EMULATOR_BAD_CONFIG)
        impairments = self._impairments.override(loss=loss, reorder=reorder, jitter_ms=jitter_ms)
        async with self._lock:
            conn = await self._host.connection_for(self.user_id)
            self._utterances += 1
            # One reproducible random stream per (emulator seed, user, utterance).
            planner = ImpairmentPlanner(impairments, seed=self._seed * 1_000_003 + self._utterances)
            renderer = EchoRenderer(self._room, echo) if echo is not None else None
            return await self._rtp.stream(conn, pcm, planner, options, renderer, lead=self._speaking_lead)
