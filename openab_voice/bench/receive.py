"""Receive benchmark: packets per second per core through the real receive path.

Packets are built before timing exactly as Discord clients send them (Opus from
``discord.opus.Encoder``, DAVE frames from a :class:`~openab_voice.testing.emulator.mls.DaveGroup`,
transport-sealed RTP with a one-byte header extension). Timing then covers
:meth:`~openab_voice.discord.wire.receiver.ReceivePipeline.handle_packet` (transport decrypt, SSRC
lookup, DAVE decrypt, jitter buffer, Opus decode) single-threaded, as the receive worker runs it;
the inbox hand-off and delivery to asyncio are excluded.

The packet builders here are also what the receive tests use to produce real traffic.
"""

from __future__ import annotations

import itertools
import os
import statistics
from typing import Any

import numpy as np
from discord.opus import Encoder

from openab_voice.audio.frame import DISCORD_FRAME_SAMPLES, DISCORD_RATE, AudioFrame
from openab_voice.bus.events import Event
from openab_voice.clock import perf_ns, thread_cpu_ns
from openab_voice.discord.wire.pipeline import DaveDecryptor, ReceivePipeline, ReceiverSettings
from openab_voice.discord.wire.rtp import build_header
from openab_voice.discord.wire.transport import TransportCipher, cipher_for, seal_packet
from openab_voice.testing.emulator.mls import DaveGroup

__all__ = ["RtpSender", "opus_tone", "run"]

# RFC 8285 one-byte element as Discord clients send it (notes §2.4: ``BE DE 00 01`` + ``10 7f 00 00``).
CLIENT_EXTENSION = b"\x10\x7f"
_BENCH_CHANNEL = 900_000_000_000_000_001
_BOT_ID = 900_000_000_000_000_000


def opus_tone(frames: int, *, frequency: float = 440.0, amplitude: float = 0.3) -> list[bytes]:
    """Encode ``frames`` 20 ms stereo frames of a sine tone with in-band FEC on (Discord's default)."""
    encoder = Encoder()
    t = np.arange(frames * DISCORD_FRAME_SAMPLES) / DISCORD_RATE
    mono = (np.sin(2 * np.pi * frequency * t) * amplitude * 32767).astype("<i2")
    stereo = np.repeat(mono, 2)
    step = DISCORD_FRAME_SAMPLES * 2
    return [
        encoder.encode(stereo[i * step : (i + 1) * step].tobytes(), DISCORD_FRAME_SAMPLES)
        for i in range(frames)
    ]


class RtpSender:
    """Builds the RTP packets one Discord client sends: optional DAVE, transport seal, extension.

    Args:
        ssrc: the sender's SSRC.
        cipher: the transport cipher (the session key from op 4).
        dave: the sender's davey session, or None for DAVE off.
        extension: RFC 8285 one-byte elements put in the header extension, or None for none.
        sequence: first RTP sequence number.
        timestamp: first RTP timestamp.
    """

    def __init__(
        self,
        *,
        ssrc: int,
        cipher: TransportCipher,
        dave: Any = None,
        extension: bytes | None = CLIENT_EXTENSION,
        sequence: int = 0,
        timestamp: int = 0,
    ) -> None:
        self.ssrc = ssrc
        self.sequence = sequence
        self.timestamp = timestamp
        self._cipher = cipher
        self._dave = dave
        self._extension = extension
        self._counter = itertools.count()

    def packet(self, opus: bytes, *, sequence: int | None = None, timestamp: int | None = None) -> bytes:
        """Seal one Opus frame; without explicit numbers, the next sequence number and timestamp."""
        if sequence is None:
            sequence = self.sequence
            self.sequence = (self.sequence + 1) & 0xFFFF
        if timestamp is None:
            timestamp = self.timestamp
            self.timestamp = (self.timestamp + DISCORD_FRAME_SAMPLES) & 0xFFFF_FFFF
        if self._dave is not None:
            opus = self._dave.encrypt_opus(opus)
        header, body = build_header(sequence, timestamp, self.ssrc, extension=self._extension)
        return seal_packet(self._cipher, header, body, opus, next(self._counter))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    *,
    packets: int = 20000,
    speakers: int = 10,
    dave: bool = True,
    mode: str = "aead_xchacha20_poly1305_rtpsize",
) -> dict[str, Any]:
    """Measure the receive path; returns a JSON-able result (see the module docstring)."""
    key = os.urandom(32)
    cipher = cipher_for(mode, key)
    user_ids = [_BOT_ID + 1 + i for i in range(speakers)]
    group = DaveGroup(_BENCH_CHANNEL, [*user_ids, _BOT_ID]) if dave else None
    tone = opus_tone(150)
    senders = [
        RtpSender(ssrc=1000 + i, cipher=cipher, dave=group.sessions[uid] if group else None)
        for i, uid in enumerate(user_ids)
    ]
    # Round-robin, 20 ms apart per speaker: in order, as a quiet network delivers them.
    stream = [
        (senders[i % speakers].packet(tone[(i // speakers) % len(tone)]), 1000.0 + (i // speakers) * 0.020)
        for i in range(packets + speakers)
    ]

    frames = 0

    def count(_: AudioFrame) -> None:
        nonlocal frames
        frames += 1

    def ignore(_: Event) -> None:
        return None

    pipeline = ReceivePipeline(settings=ReceiverSettings(), emit=count, publish=ignore)
    pipeline.set_transport(cipher)
    if group is not None:
        bot: DaveDecryptor = group.sessions[_BOT_ID]
        pipeline.set_dave_source(lambda: bot)
    for sender, uid in zip(senders, user_ids, strict=True):
        pipeline.map_ssrc(sender.ssrc, str(uid), 1000.0)
    for data, arrival in stream[:speakers]:  # warm-up: creates each SSRC's decoder
        pipeline.handle_packet(data, arrival)

    latencies: list[float] = []
    handle = pipeline.handle_packet
    cpu_start = thread_cpu_ns()
    for data, arrival in stream[speakers:]:
        start = perf_ns()
        handle(data, arrival)
        latencies.append((perf_ns() - start) / 1000)
    cpu_s = (thread_cpu_ns() - cpu_start) / 1e9

    snapshot = pipeline.stats.snapshot()
    dropped = sum(sum(s["dropped"].values()) for s in snapshot["speakers"].values())
    packets_per_s = packets / cpu_s if cpu_s > 0 else float("inf")
    return {
        "packets_per_s": round(packets_per_s, 1),
        "per_packet_us": {
            "p50": round(_percentile(latencies, 0.50), 1),
            "p95": round(_percentile(latencies, 0.95), 1),
            "mean": round(statistics.fmean(latencies), 1),
        },
        "speakers_per_core_at_50pps": round(packets_per_s / 50, 1),
        "dave": dave,
        "mode": mode,
        "packets": packets,
        "speakers": speakers,
        "frames_decoded": frames,
        "dropped": dropped + sum(snapshot["unattributed"].values()),
    }
