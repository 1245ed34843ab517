"""What the bot played, as the voice server receives it: transport-decrypted, DAVE-decrypted
(when on) and Opus-decoded into 48 kHz stereo s16le for inspection.

discord.py sends a 12-byte RTP header without extension, ``aead_*_rtpsize`` sealed with a 4-byte
counter nonce (``VoiceClient._get_voice_packet``), and ends each playback with five Opus silence
frames ``F8 FF FE`` (``AudioPlayer._send_silence``). Silence frames are counted, not appended, so a
one-second tone yields one second of PCM.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from discord.opus import Decoder, OpusError

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.discord.wire.rtp import OPUS_SILENCE
from openab_voice.discord.wire.transport import TransportCipher, open_packet
from openab_voice.errors import OpenabError, PacketError
from openab_voice.testing.emulator.echo import RoomAudio

_MAX_CONCEALED_GAP = 10  # frames; a longer hole is a new talk spurt, not loss
_BYTES_PER_MS = DISCORD_FRAME_BYTES // 20
_SPURT_GAP_S = 0.2  # audio after this long without any is the start of new speech
_SPURTS_KEPT = 256

DaveDecrypt = Callable[[bytes], bytes]


class BotAudioSink:
    """Receives the bot's RTP and keeps the decoded audio.

    Attributes:
        packets: RTP packets from the bot that decrypted and decoded.
        silence_frames: Opus silence frames received (not part of :meth:`pcm`).
        concealed_frames: frames synthesised by Opus PLC for sequence gaps.
        decrypt_failures: packets whose transport or DAVE decryption failed.
        decode_failures: packets that decrypted but were not valid Opus.
        late_packets: duplicate or out-of-order packets that were dropped.
        last_audio_at: arrival time (the emulator's clock) of the last packet that decoded to audio,
            Opus silence frames excluded: when the bot's sound last reached the call (None: never).
        spurt_starts: arrival times of the first audio packet of each of the last talk spurts (audio
            after Opus silence frames or after ``_SPURT_GAP_S`` without audio), oldest first.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the audio and counters (decoders restart too)."""
        self.room = RoomAudio()  # the same audio on a timeline, for speakers' echo
        self._chunks: list[bytes] = []
        self._bytes = 0
        self._decoders: dict[int, Decoder] = {}
        self._last_seq: dict[int, int] = {}
        self.packets = 0
        self.silence_frames = 0
        self.concealed_frames = 0
        self.decrypt_failures = 0
        self.decode_failures = 0
        self.late_packets = 0
        self.last_audio_at: float | None = None
        self.spurt_starts: deque[float] = deque(maxlen=_SPURTS_KEPT)
        self._after_silence = True

    def first_audio_after(self, since: float) -> float | None:
        """When the bot's first sound that started after ``since`` reached the call (None: none yet).

        A spurt's first packet, not :attr:`last_audio_at` read whenever a caller happens to look:
        a poll that runs late would otherwise add its own delay to a latency it measures.
        """
        return next((start for start in self.spurt_starts if start > since), None)

    def forget_pcm(self) -> None:
        """Drop the decoded audio kept for :meth:`pcm` (counters, ``ms`` and the room's recent
        timeline stay): a long run that does not read it back, e.g. the soak."""
        self._chunks.clear()

    def pcm(self) -> bytes:
        """Everything decoded so far: interleaved 48 kHz stereo s16le."""
        return b"".join(self._chunks)

    @property
    def ms(self) -> float:
        """Milliseconds of decoded (non-silence) audio."""
        return self._bytes / _BYTES_PER_MS

    def feed(self, packet: bytes, cipher: TransportCipher, dave: DaveDecrypt | None, arrival: float) -> None:
        """Process one datagram from the bot, received at ``arrival``; failures are counted, never raised."""
        try:
            header, payload = open_packet(cipher, packet)
        except PacketError:
            self.decrypt_failures += 1
            return
        last = self._last_seq.get(header.ssrc)
        gap = 1 if last is None else (header.sequence - last) & 0xFFFF
        if gap == 0 or gap > 0x8000:
            self.late_packets += 1
            return
        self._last_seq[header.ssrc] = header.sequence
        if payload == OPUS_SILENCE:
            self.silence_frames += 1
            self._after_silence = True
            return
        if dave is not None:
            try:
                payload = dave(payload)
            except OpenabError:
                self.decrypt_failures += 1
                return
        decoder = self._decoders.get(header.ssrc)
        if decoder is None:
            # discord.py's Decoder.__init__ has no annotations.
            decoder = self._decoders[header.ssrc] = Decoder()  # type: ignore[no-untyped-call]
        try:
            if 1 < gap <= _MAX_CONCEALED_GAP:
                for _ in range(gap - 1):
                    self._append(decoder.decode(None, fec=False), arrival)
                    self.concealed_frames += 1
            self._append(decoder.decode(payload, fec=False), arrival)
        except OpusError:
            self.decode_failures += 1
            return
        self.packets += 1
        if self._after_silence or self.last_audio_at is None or arrival - self.last_audio_at > _SPURT_GAP_S:
            self.spurt_starts.append(arrival)
        self._after_silence = False
        self.last_audio_at = arrival

    def _append(self, pcm: bytes, arrival: float) -> None:
        self.room.add(pcm, arrival)
        self._chunks.append(pcm)
        self._bytes += len(pcm)
