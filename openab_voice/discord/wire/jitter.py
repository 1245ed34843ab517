"""Per-SSRC jitter buffer and Opus decoding with FEC/PLC concealment.

Each SSRC gets one :class:`JitterBuffer` that orders packets by RTP sequence number (unwrapped). A
packet next in sequence is decoded as it arrives; a gap waits at most ``depth`` packets or
``depth * 20 ms``, then is rebuilt by FEC or PLC (up to ``max_conceal`` packets; a longer burst
restarts the stream). Frame timestamps are the RTP time anchored on the spurt's least-transit packet,
never more than ``max_late_s`` after arrival, re-anchored after ``spurt_timeout_s`` of silence:
timestamps never go backwards and frames never overlap (overlap is trimmed, counted in ``trimmed_ms``).
Rationale and history: docs/adr/0006-audio-plane-under-cpu-contention.md.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple

import discord.opus
from discord.opus import Decoder, OpusError

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_RATE, AudioFrame
from openab_voice.discord.wire.rtp import OPUS_SILENCE
from openab_voice.discord.wire.stats import DUPLICATE, LATE, OPUS_DECODE_FAILED, SpeakerCounters

FRAME_S: Final = 0.020
# A packet this far behind the playout point is a late straggler; further behind, the sender
# restarted its sequence numbers.
_LATE_WINDOW: Final = 64
# A forward jump this large (30 s of packets) is a sender restart, not a loss worth counting.
_RESTART_GAP: Final = 1500
_BYTES_PER_MS: Final = DISCORD_RATE // 1000 * DISCORD_CHANNELS * 2
_MAX_PACKET_SAMPLES: Final = 5760  # 120 ms, the longest Opus packet


class OpusDecoder(Decoder):
    """``discord.opus.Decoder`` decoding into one preallocated buffer.

    discord.py 2.7.1's ``Decoder.decode`` allocates a ctypes array per call and copies it out
    through a Python list (``array.array('h', pcm[:n])``), which costs more than libopus itself
    (about 80 us of a 150 us decode here). Same libopus handle, same semantics, one ``memcpy``.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._out = (ctypes.c_int16 * (_MAX_PACKET_SAMPLES * DISCORD_CHANNELS))()

    def decode(self, data: bytes | None, *, fec: bool = False) -> bytes:
        """Decode ``data`` (FEC data of the frame before it when ``fec``), or conceal one frame (``None``)."""
        if data is None:
            if fec:
                raise TypeError("FEC needs the next packet's data")
            # libopus wants the exact missing duration for PLC and FEC; assume the previous one.
            frame_size = self._get_last_packet_duration() or self.SAMPLES_PER_FRAME
        elif fec:
            frame_size = self.packet_get_nb_frames(data) * self.packet_get_samples_per_frame(data)
        else:
            frame_size = _MAX_PACKET_SAMPLES  # capacity: libopus decodes the whole packet
        lib = discord.opus._lib
        samples = lib.opus_decode(
            self._state, data, len(data) if data else 0, self._out, frame_size, int(fec)
        )
        return ctypes.string_at(self._out, samples * DISCORD_CHANNELS * 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class JitterSettings:
    """Tuning of one jitter buffer.

    Attributes:
        depth: packets held back to wait for a missing one; also the wait in 20 ms frames.
        max_conceal: the longest burst of missing packets that is concealed rather than lost.
        spurt_timeout_s: a gap in arrivals longer than this starts a new talk spurt.
        max_late_s: the most a frame is stamped later than its own time (on the least-transit
            timeline) to stay contiguous with the frames before it; past that, the overlap is cut.
    """

    depth: int = 3
    max_conceal: int = 5
    spurt_timeout_s: float = 0.5
    max_late_s: float = FRAME_S


class _Held(NamedTuple):
    rtp_timestamp: int
    payload: bytes
    arrival: float


class JitterBuffer:
    """Orders, conceals and decodes the packets of one SSRC.

    Args:
        speaker_id: the user the SSRC belongs to, stamped on every frame.
        counters: the speaker's counters, updated in place.
        settings: buffer tuning.
        frame_ids: the speaker's frame id source, shared across that speaker's SSRCs so ids stay
            strictly increasing per speaker.
        decoder: the SSRC's Opus decoder (one per SSRC: Opus decoding is stateful).
    """

    def __init__(
        self,
        *,
        speaker_id: str,
        counters: SpeakerCounters,
        settings: JitterSettings = JitterSettings(),
        frame_ids: Iterator[int] | None = None,
        decoder: OpusDecoder | None = None,
    ) -> None:
        self._speaker_id = speaker_id
        self._counters = counters
        self._depth = settings.depth
        self._max_conceal = settings.max_conceal
        self._wait = settings.depth * FRAME_S
        self._spurt_timeout = settings.spurt_timeout_s
        self._max_late = settings.max_late_s
        self._frame_ids = frame_ids if frame_ids is not None else itertools.count()
        self._decoder = decoder if decoder is not None else OpusDecoder()
        self._held: dict[int, _Held] = {}
        self._next: int | None = None  # extended sequence number of the next frame to play
        self._resync = False  # a new talk spurt started: jump to its first packet
        self._highest: int | None = None  # unwrap reference
        self._played: collections.deque[int] = collections.deque(maxlen=_LATE_WINDOW)
        self._last_arrival: float | None = None
        # (time on our clock, RTP timestamp) of the spurt's least-transit packet
        self._anchor: tuple[float, int] | None = None
        self._last_end: float | None = None  # end time of the last emitted frame

    @property
    def held(self) -> int:
        """Packets waiting in the buffer."""
        return len(self._held)

    def pending_since(self) -> float | None:
        """Earliest capture time a frame still to come out of this buffer can have (None: nothing held).

        Frames leave in order and never overlap (:meth:`_emit`), so while packets wait for a gap the
        next frame starts where the last one ended.
        """
        if not self._held:
            return None
        if self._last_end is not None:
            return self._last_end
        return min(h.arrival for h in self._held.values())

    def push(self, sequence: int, rtp_timestamp: int, payload: bytes, arrival: float) -> list[AudioFrame]:
        """Add one packet's Opus payload; returns the frames it released, in order."""
        out: list[AudioFrame] = []
        ext = self._unwrap(sequence)
        if self._next is not None:
            behind = self._next - ext
            if 0 < behind <= _LATE_WINDOW:
                self._counters.drop(DUPLICATE if ext in self._played else LATE)
                return out
            if behind > _LATE_WINDOW or -behind > _RESTART_GAP:
                self._restart(out)
                ext = self._unwrap(sequence)
        if ext in self._held:
            self._counters.drop(DUPLICATE)
            return out
        if self._last_arrival is not None and arrival - self._last_arrival > self._spurt_timeout:
            self._new_spurt(out)
        self._observe_transit(arrival, rtp_timestamp)
        self._held[ext] = _Held(rtp_timestamp, payload, arrival)
        self._last_arrival = arrival
        # Nothing plays these frames on a clock: they go to VAD and STT, so a packet that is next in
        # sequence (or starts a stream or a talk spurt) is released at once; only a gap is waited for,
        # up to ``depth`` packets. Waiting always would add ``depth * 20 ms`` to every speech onset.
        while self._held and (len(self._held) > self._depth or self._head_in_order()):
            self._release_one(out)
        return out

    def _head_in_order(self) -> bool:
        return self._next is None or self._resync or min(self._held) == self._next

    def flush(self, now: float) -> list[AudioFrame]:
        """Release every packet that has waited ``depth * 20 ms`` (and the gaps before it)."""
        out: list[AudioFrame] = []
        while self._held and now - min(h.arrival for h in self._held.values()) >= self._wait:
            self._release_one(out)
        return out

    def drain(self) -> list[AudioFrame]:
        """Release everything held (the speaker left, or the stream is being replaced)."""
        out: list[AudioFrame] = []
        while self._held:
            self._release_one(out)
        return out

    def _unwrap(self, sequence: int) -> int:
        ref = self._highest
        if ref is None:
            self._highest = sequence
            return sequence
        delta = ((sequence - ref + 0x8000) & 0xFFFF) - 0x8000
        ext = ref + delta
        if ext > ref:
            self._highest = ext
        return ext

    def _restart(self, out: list[AudioFrame]) -> None:
        """The sender's sequence jumped: play what is held, then start over without counting loss."""
        while self._held:
            self._release_one(out)
        self._next = None
        self._resync = False
        self._highest = None
        self._anchor = None
        self._played.clear()

    def _new_spurt(self, out: list[AudioFrame]) -> None:
        """Silence ended: play what is held; the next release jumps (without concealment) to the
        first packet of the new spurt, while stragglers from the old one still count as late."""
        while self._held:
            self._release_one(out)
        self._anchor = None
        self._resync = True

    def _release_one(self, out: list[AudioFrame]) -> None:
        """Play the head of the buffer, or conceal (or give up on) the gap in front of it."""
        first = min(self._held)
        if self._next is None:
            self._next = first
        elif self._resync:
            if first - self._next <= _RESTART_GAP:
                # Packets that went missing across the silence are gone for good: no concealment.
                self._counters.lost += first - self._next
            self._next = first
        self._resync = False
        gap = first - self._next
        if gap == 0:
            held = self._held.pop(first)
            self._next += 1
            self._played.append(first)
            try:
                pcm = self._decoder.decode(held.payload, fec=False)
            except OpusError:
                self._counters.drop(OPUS_DECODE_FAILED)
                return
            self._emit(
                pcm,
                self._rtp_time(held.rtp_timestamp),
                concealed=False,
                out=out,
                end_of_transmission=held.payload == OPUS_SILENCE,
            )
            return
        if gap > self._max_conceal:
            self._counters.lost += gap
            self._next = first
            # The sender's timeline may have jumped across the burst: anchor afresh on what is held.
            self._anchor = None
            for held in self._held.values():
                self._observe_transit(held.arrival, held.rtp_timestamp)
            return
        self._next += 1
        self._counters.lost += 1  # lost = never received, whether concealed or not (as RTCP counts it)
        try:
            if gap == 1:
                pcm = self._decoder.decode(self._held[first].payload, fec=True)
            else:
                pcm = self._decoder.decode(None, fec=False)
        except OpusError:
            return
        self._counters.concealed += 1
        self._emit(pcm, None, concealed=True, out=out)

    def _observe_transit(self, arrival: float, rtp_timestamp: int) -> None:
        """Anchor on this packet if it is the first of the spurt or arrived before the anchor's time for it."""
        if self._anchor is None or arrival < self._rtp_time(rtp_timestamp):
            self._anchor = (arrival, rtp_timestamp)

    def _rtp_time(self, rtp_timestamp: int) -> float:
        assert self._anchor is not None  # set by push() before any packet is held
        at, anchor_ts = self._anchor
        delta = ((rtp_timestamp - anchor_ts + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000
        return at + delta / DISCORD_RATE

    def _emit(
        self,
        pcm: bytes,
        at: float | None,
        *,
        concealed: bool,
        out: list[AudioFrame],
        end_of_transmission: bool = False,
    ) -> None:
        if not pcm:
            return
        last_end = self._last_end
        if at is None:
            at = last_end if last_end is not None else (self._anchor[0] if self._anchor else 0.0)
        elif last_end is not None and at < last_end:
            # Keep frames ordered and non-overlapping: start where the last one ended, and cut what
            # would be stamped more than ``max_late_s`` after its own time (the anchor moved earlier).
            cut = round((last_end - at - self._max_late) * DISCORD_RATE) * DISCORD_CHANNELS * 2
            if cut > 0:
                self._counters.trimmed_ms += min(cut, len(pcm)) / _BYTES_PER_MS
                pcm = pcm[cut:]
                if not pcm:
                    return
            at = last_end
        duration_ms = len(pcm) / _BYTES_PER_MS
        self._last_end = at + duration_ms / 1000
        counters = self._counters
        counters.decoded_frames += 1
        counters.decoded_ms += duration_ms
        out.append(
            AudioFrame(
                pcm=pcm,
                sample_rate=DISCORD_RATE,
                channels=DISCORD_CHANNELS,
                timestamp=at,
                frame_id=next(self._frame_ids),
                speaker_id=self._speaker_id,
                concealed=concealed,
                end_of_transmission=end_of_transmission,
            )
        )
