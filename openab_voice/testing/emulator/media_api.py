"""Media on the voice UDP port, as :class:`~openab_voice.testing.emulator.DiscordEmulator` methods:
what the bot played (decrypted and decoded as the hidden recorder member), and audio or raw
datagrams sent to the bot that no speaker owns."""

from __future__ import annotations

import random

from openab_voice.clock import Clock
from openab_voice.discord.wire.rtp import parse_header
from openab_voice.errors import EmulatorError, ErrorCode, PacketError
from openab_voice.testing.emulator.bot_audio import BotAudioSink
from openab_voice.testing.emulator.config import EmulatorConfig
from openab_voice.testing.emulator.impairments import ImpairmentPlanner
from openab_voice.testing.emulator.rtp_stream import RtpStream, SendReport, StreamOptions
from openab_voice.testing.emulator.voice_gateway import VoiceGateway
from openab_voice.testing.emulator.voice_room import VoiceRoom
from openab_voice.testing.emulator.voice_udp import Address, VoiceUdpServer, datagram_kind


class MediaApi:
    """Mixed into ``DiscordEmulator``, which provides the parts below."""

    config: EmulatorConfig
    bot_audio: BotAudioSink
    unknown_packets: int
    recorder_user_id: int
    _voice: VoiceGateway
    _room: VoiceRoom
    _udp: VoiceUdpServer
    _clock: Clock
    _rng: random.Random
    _ssrcs: set[int]  # every speaker's and the bot's
    _unmapped: dict[int, RtpStream]  # streams of send_unmapped_ssrc, by SSRC

    def bot_audio_pcm(self) -> bytes:
        """Everything the bot played so far, decoded: 48 kHz stereo s16le (``bot_audio.pcm()``)."""
        return self.bot_audio.pcm()

    @property
    def bot_audio_ms(self) -> float:
        """Milliseconds of decoded bot audio, trailing silence frames excluded (``bot_audio.ms``)."""
        return self.bot_audio.ms

    def _on_media(self, data: bytes, addr: Address) -> None:
        if datagram_kind(data) == "keepalive":
            return  # counted by the UDP server; like Discord's, it carries nothing to decode
        try:
            ssrc = parse_header(data).ssrc
        except PacketError:
            self.unknown_packets += 1
            return
        conn = self._voice.connection_for_ssrc(ssrc)
        if conn is None or conn.cipher is None:
            self.unknown_packets += 1
            return
        dave = None if conn.dave is None or conn.dave_version == 0 else conn.dave.decrypt_from_bot
        self.bot_audio.feed(data, conn.cipher, dave, self._clock.monotonic())

    async def send_raw_udp(self, data: bytes) -> None:
        """Send an arbitrary datagram to the bot's voice socket from the voice server's port.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when the bot has no voice session.
        """
        conn = self._voice.active
        if conn is None or conn.bot_addr is None:
            raise EmulatorError("the bot has no voice session", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        self._udp.send(data, conn.bot_addr)

    async def send_unmapped_ssrc(
        self,
        ssrc: int,
        pcm48k_stereo: bytes,
        *,
        loss: float | None = None,
        reorder: float | None = None,
        jitter_ms: float | None = None,
    ) -> SendReport:
        """Stream audio from an SSRC that no op 5 ever maps to a user (DAVE-encrypted by the hidden
        recorder member when DAVE is on), correctly transport-sealed.

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` when ``ssrc`` belongs to a speaker or the bot;
                ``EMULATOR_NOT_CONNECTED`` when the bot is not in voice.
        """
        if ssrc in self._ssrcs or not 0 < ssrc <= 0xFFFFFFFF:
            raise EmulatorError(f"SSRC {ssrc} is taken or invalid", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        if len(pcm48k_stereo) % 4:
            raise EmulatorError("PCM must be whole 16-bit stereo samples", code=ErrorCode.EMULATOR_BAD_AUDIO)
        conn = await self._room.ready_connection()
        stream = self._unmapped.get(ssrc)
        if stream is None:
            start = (self._rng.randrange(0x10000), self._rng.randrange(0x100000000))
            stream = self._unmapped[ssrc] = RtpStream(
                clock=self._clock, ssrc=ssrc, rtp_start=start, send=self._udp.send
            )
        impairments = self.config.impairments().override(loss=loss, reorder=reorder, jitter_ms=jitter_ms)
        planner = ImpairmentPlanner(impairments, seed=self.config.seed * 1_000_003 + ssrc)
        dave_user = None if conn.dave is None else self.recorder_user_id
        return await stream.stream(
            conn, pcm48k_stereo, planner, StreamOptions(speaking_user=None, dave_user=dave_user)
        )
