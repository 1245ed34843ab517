"""One SSRC's audio towards the bot: Opus frames, DAVE, RTP sealing, impairments and pacing.

Packets look like a real client's (notes §2.4): X bit set with a one-byte header extension whose
``BE DE`` preamble is in the AAD and whose body is encrypted with the payload. Frame ``i`` is due at
the absolute deadline ``start + i * 20 ms`` on the injected clock, so pacing never drifts; jitter
delays a packet past its deadline, a "swap" sends it right after its successor. An utterance ends
with five Opus silence frames, as Discord clients send.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from discord.opus import Encoder

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, DISCORD_FRAME_SAMPLES, DISCORD_RATE
from openab_voice.clock import Clock
from openab_voice.discord.wire.rtp import OPUS_SILENCE, build_header
from openab_voice.discord.wire.transport import cipher_for, seal_packet
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.echo import EchoRenderer, mix_frame
from openab_voice.testing.emulator.impairments import ImpairmentPlanner
from openab_voice.testing.emulator.voice_connection import OP_SPEAKING, VoiceConnection

FRAME_SECONDS = DISCORD_FRAME_SAMPLES / DISCORD_RATE
SILENCE_FRAMES = 5
# One RFC 6464 audio-level element (id 1, one byte), as Discord's clients attach to every packet.
_AUDIO_LEVEL_EXTENSION = b"\x10\x7f"

SendDatagram = Callable[[bytes, tuple[str, int]], None]


@functools.lru_cache(maxsize=32)
def encode_speech(pcm: bytes) -> tuple[bytes, ...]:
    """The Opus frames of one utterance (48 kHz stereo s16le, the last frame zero-padded), encoded
    once per content with a fresh encoder and kept: the same clip said again, by anyone, is not
    encoded again.

    A real client encodes on its own machine. The emulator shares the bot's process, so a benchmark
    calls this for its clips before it starts timing (:func:`prepare_speech`): encoding ten talkers'
    clips while they talk took about 4 s of CPU from the bot under test in a 10 s run.
    """
    encoder = Encoder()
    frames = -(-len(pcm) // DISCORD_FRAME_BYTES)
    return tuple(
        bytes(
            encoder.encode(
                pcm[i * DISCORD_FRAME_BYTES : (i + 1) * DISCORD_FRAME_BYTES].ljust(
                    DISCORD_FRAME_BYTES, b"\x00"
                ),
                DISCORD_FRAME_SAMPLES,
            )
        )
        for i in range(frames)
    )


def prepare_speech(*clips: bytes) -> None:
    """Encode ``clips`` ahead (see :func:`encode_speech`): a later ``say`` of one of them sends at once."""
    for pcm in clips:
        encode_speech(pcm)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendReport:
    """What one utterance did.

    Attributes:
        frames: audio frames in the utterance (20 ms each, the last one zero-padded).
        silence_frames: trailing Opus silence frames.
        sent: packets that went out.
        dropped_by_impairment: packets the emulated network lost.
        reordered: packets sent after their successor on purpose.
        completed: False when the bot left the call before the utterance ended.
    """

    frames: int
    silence_frames: int
    sent: int
    dropped_by_impairment: int
    reordered: int
    completed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOptions:
    """How to send one utterance.

    Attributes:
        speaking_user: announce ``op 5 {user_id, ssrc}`` for this user (``None``: never announce).
        send_before_speaking: packets sent before that op 5.
        dave_user: DAVE-encrypt as this group member (``None``: send raw Opus even in a DAVE call).
        wrong_key: seal with a random transport key instead of the session's.
    """

    speaking_user: int | None
    send_before_speaking: int = 0
    dave_user: int | None = None
    wrong_key: bool = False


@dataclass(order=True, slots=True)
class _Queued:
    at: float
    after_successor: int
    index: int
    packet: bytes = field(compare=False)


class RtpStream:
    """Sequence number, timestamp and encoder state of one SSRC, kept across utterances.

    Args:
        clock: paces the packets.
        ssrc: the stream's SSRC.
        rtp_start: initial ``(sequence, timestamp)``.
        send: puts one datagram on the wire.
    """

    def __init__(self, *, clock: Clock, ssrc: int, rtp_start: tuple[int, int], send: SendDatagram) -> None:
        self._clock = clock
        self.ssrc = ssrc
        self._seq, self._ts = rtp_start
        self._send = send
        self._next_ts_due: float | None = None  # capture time of the sample ``_ts`` stands for
        self._encoder: Encoder | None = None

    async def stream(
        self,
        conn: VoiceConnection,
        pcm: bytes,
        planner: ImpairmentPlanner,
        options: StreamOptions,
        echo: EchoRenderer | None = None,
        *,
        lead: float = 0.0,
    ) -> SendReport:
        """Send ``pcm`` (48 kHz stereo s16le) in real time; returns once the last packet left.

        With ``echo``, each frame is mixed just in time with the echo of what the bot played.
        ``lead``: seconds between op 5 and the first packet of this SSRC on ``conn``.
        """
        frames = -(-len(pcm) // DISCORD_FRAME_BYTES)
        total = frames + SILENCE_FRAMES
        pacer = _Pacer(self, conn, options)
        if (
            lead > 0
            and options.speaking_user is not None
            and options.send_before_speaking == 0
            and self.ssrc not in conn.speaking_announced
        ):
            # Discord relays SPEAKING ahead of the media: a client that handles a packet before the
            # op 5 mapping its SSRC drops it (@discordjs/voice does).
            await pacer.announce()
            await self.sleep_until(self._clock.monotonic() + lead)
        # A real client encodes on its own machine: without an echo to mix in just in time, the
        # utterance is encoded up front on a worker thread (or was, by prepare_speech), so the bot's
        # event loop (which the emulator shares) never stalls behind a talker's encoder.
        opus = (
            None
            if echo is not None
            else await asyncio.get_running_loop().run_in_executor(None, encode_speech, pcm)
        )
        start = self._clock.monotonic()
        self._advance_timestamp_over_pause(start)
        held: _Queued | None = None
        dropped = reordered = 0
        for i in range(total):
            due = start + i * FRAME_SECONDS
            await pacer.drain(due)
            await self.sleep_until(due)  # encode just in time, as a live microphone would
            if conn.closed.is_set():
                return pacer.report(frames, dropped, reordered, completed=False)
            chunk = pcm[i * DISCORD_FRAME_BYTES : (i + 1) * DISCORD_FRAME_BYTES] if i < frames else None
            if echo is not None and chunk is not None:
                chunk = mix_frame(chunk, echo.frame(due))
            packet = self._packet(conn, chunk, options, opus[i] if opus is not None and i < frames else None)
            self._next_ts_due = due + FRAME_SECONDS
            fate = planner.next()
            if fate.dropped:
                dropped += 1
                continue
            item = _Queued(at=due + fate.extra_delay, after_successor=0, index=i, packet=packet)
            if held is not None:  # the held packet goes right after this one
                pacer.push(item)
                pacer.push(_Queued(at=item.at, after_successor=1, index=held.index, packet=held.packet))
                held = None
            elif fate.swapped and i < total - 1:
                held = item
                reordered += 1
            else:
                pacer.push(item)
        if held is not None:  # every later packet was lost: nothing to swap with
            pacer.push(held)
            reordered -= 1
        await pacer.drain(float("inf"))
        await pacer.announce()
        return pacer.report(frames, dropped, reordered, completed=not conn.closed.is_set())

    async def sleep_until(self, deadline: float) -> None:
        """Sleep on the injected clock until the absolute ``deadline``."""
        delay = deadline - self._clock.monotonic()
        if delay > 0:
            await self._clock.sleep(delay)

    def emit(self, packet: bytes, address: tuple[str, int]) -> None:
        """Put one packet on the wire now."""
        self._send(packet, address)

    def _advance_timestamp_over_pause(self, start: float) -> None:
        # RTP timestamps keep counting through the silence between utterances (RFC 3550 §5.1): the
        # first frame's timestamp is its capture time on the sender's sample clock. (Counting whole
        # frames from the last send instead overshot every pause by up to a frame, and a receiver
        # that keeps its anchor across a short pause stamped each later utterance up to 20 ms later.)
        if self._next_ts_due is not None and start > self._next_ts_due:
            paused = round((start - self._next_ts_due) * DISCORD_RATE)
            self._ts = (self._ts + paused) & 0xFFFFFFFF

    def _encode(self, chunk: bytes) -> bytes:
        if self._encoder is None:
            self._encoder = Encoder()
        return bytes(self._encoder.encode(chunk.ljust(DISCORD_FRAME_BYTES, b"\x00"), DISCORD_FRAME_SAMPLES))

    def _packet(
        self, conn: VoiceConnection, chunk: bytes | None, options: StreamOptions, opus: bytes | None = None
    ) -> bytes:
        if conn.cipher is None or conn.mode is None:
            raise EmulatorError("voice session has no key yet", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        if chunk is None:
            payload = OPUS_SILENCE
        else:
            payload = opus if opus is not None else self._encode(chunk)
            if conn.dave is not None and conn.dave_version > 0 and options.dave_user is not None:
                payload = conn.dave.encrypt(options.dave_user, payload)
        header, extension = build_header(self._seq, self._ts, self.ssrc, extension=_AUDIO_LEVEL_EXTENSION)
        self._seq = (self._seq + 1) & 0xFFFF
        self._ts = (self._ts + DISCORD_FRAME_SAMPLES) & 0xFFFFFFFF
        cipher = cipher_for(conn.mode, os.urandom(32)) if options.wrong_key else conn.cipher
        return seal_packet(cipher, header, extension, payload, conn.next_nonce())


class _Pacer:
    """Sends queued packets at their deadlines and op 5 at the right moment."""

    def __init__(self, stream: RtpStream, conn: VoiceConnection, options: StreamOptions) -> None:
        self._stream = stream
        self._conn = conn
        self._options = options
        self._queue: list[_Queued] = []
        self._sent = 0
        self._announced = options.speaking_user is None

    def push(self, item: _Queued) -> None:
        heapq.heappush(self._queue, item)

    async def drain(self, before: float) -> None:
        """Send every queued packet due before ``before``, each at its own deadline."""
        stream, conn = self._stream, self._conn
        while self._queue and self._queue[0].at < before:
            item = heapq.heappop(self._queue)
            await stream.sleep_until(item.at)
            if self._sent >= self._options.send_before_speaking:
                await self.announce()
            if conn.closed.is_set() or conn.bot_addr is None:
                self._queue.clear()
                return
            stream.emit(item.packet, conn.bot_addr)
            self._sent += 1

    async def announce(self) -> None:
        """op 5 SPEAKING: the SSRC -> user mapping a receiver needs (Discord's only source of it)."""
        if self._announced or self._conn.closed.is_set():
            return
        self._announced = True
        self._conn.speaking_announced.add(self._stream.ssrc)
        user = self._options.speaking_user
        await self._conn.send_json(
            OP_SPEAKING, {"user_id": str(user), "ssrc": self._stream.ssrc, "speaking": 1}
        )

    def report(self, frames: int, dropped: int, reordered: int, *, completed: bool) -> SendReport:
        return SendReport(
            frames=frames,
            silence_frames=SILENCE_FRAMES,
            sent=self._sent,
            dropped_by_impairment=dropped,
            reordered=reordered,
            completed=completed,
        )
