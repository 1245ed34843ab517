"""The per-SSRC jitter buffer with real Opus packets and a real libopus decoder."""

from __future__ import annotations

import pytest

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, AudioFrame
from openab_voice.bench.receive import opus_tone
from openab_voice.discord.wire.jitter import JitterBuffer, JitterSettings, OpusDecoder
from openab_voice.discord.wire.stats import SpeakerCounters

TONE = opus_tone(40)
T0 = 100.0


class RecordingDecoder(OpusDecoder):
    """The real decoder, remembering how each frame was produced: "data", "fec" or "plc"."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def decode(self, data: bytes | None, *, fec: bool = False) -> bytes:
        self.calls.append("plc" if data is None else ("fec" if fec else "data"))
        return super().decode(data, fec=fec)


def make(depth: int = 3, max_conceal: int = 5) -> tuple[JitterBuffer, SpeakerCounters, RecordingDecoder]:
    counters = SpeakerCounters()
    decoder = RecordingDecoder()
    buffer = JitterBuffer(
        speaker_id="42",
        counters=counters,
        settings=JitterSettings(depth=depth, max_conceal=max_conceal),
        decoder=decoder,
    )
    return buffer, counters, decoder


def feed(
    buffer: JitterBuffer,
    order: list[int],
    *,
    base_seq: int = 0,
    base_ts: int = 0,
    start: float = T0,
) -> list[AudioFrame]:
    """Push packets ``order`` (offsets from ``base_seq``), then flush everything.

    Packet ``k`` is sent at ``start + k * 20 ms``; pushed ``i``-th, it arrives no earlier than
    the ``i``-th slot (a packet never arrives before it was sent; one sent after its successor
    arrives with it).
    """
    out: list[AudioFrame] = []
    now = start
    for i, k in enumerate(order):
        now = start + max(i, k) * 0.020
        out += buffer.push(
            (base_seq + k) & 0xFFFF, (base_ts + k * 960) & 0xFFFF_FFFF, TONE[k % len(TONE)], now
        )
    out += buffer.flush(now + 1.0)
    return out


def assert_well_formed(frames: list[AudioFrame]) -> None:
    ids = [f.frame_id for f in frames]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for a, b in zip(frames, frames[1:], strict=False):
        assert b.timestamp >= a.timestamp + a.duration - 1e-9
    for f in frames:
        assert len(f.pcm) == DISCORD_FRAME_BYTES
        assert (f.sample_rate, f.channels, f.speaker_id) == (48_000, 2, "42")


def test_in_order_packets_decode_with_rtp_timing() -> None:
    buffer, counters, decoder = make()
    frames = feed(buffer, list(range(10)))
    assert len(frames) == 10 and not any(f.concealed for f in frames)
    assert [f.timestamp for f in frames] == pytest.approx([T0 + k * 0.020 for k in range(10)])
    assert decoder.calls == ["data"] * 10
    assert counters.decoded_frames == 10 and counters.decoded_ms == pytest.approx(200.0)
    assert counters.lost == counters.concealed == 0
    assert_well_formed(frames)


def test_in_order_packets_go_at_once_and_only_a_gap_waits_for_depth_or_time() -> None:
    buffer, counters, _ = make(depth=3)
    # Next in sequence (the first of a stream included): decoded as it arrives, no playout delay.
    assert [f.frame_id for f in buffer.push(0, 0, TONE[0], T0)] == [0]
    assert [f.frame_id for f in buffer.push(1, 960, TONE[1], T0 + 0.02)] == [1]
    # 2 is missing: 3 waits for it ...
    assert buffer.push(3, 2880, TONE[3], T0 + 0.061) == []
    assert buffer.flush(T0 + 0.110) == []
    # ... until depth * 20 ms have passed (then 2 is concealed from 3's FEC and 3 plays) ...
    released = buffer.flush(T0 + 0.122)
    assert [f.concealed for f in released] == [True, False] and counters.lost == 1
    # ... or more than ``depth`` packets are held behind a gap.
    assert buffer.push(5, 4800, TONE[5], T0 + 0.123) == []
    assert buffer.push(6, 5760, TONE[6], T0 + 0.124) == []
    assert buffer.push(7, 6720, TONE[7], T0 + 0.145) == []
    assert buffer.held == 3
    assert len(buffer.push(8, 7680, TONE[8], T0 + 0.165)) == 5  # 4 concealed, then 5..8 in order
    assert buffer.held == 0


def test_reordered_packets_come_out_in_order() -> None:
    buffer, counters, decoder = make()
    frames = feed(buffer, [0, 2, 1, 3, 5, 4, 6, 7])
    assert len(frames) == 8 and not any(f.concealed for f in frames)
    assert decoder.calls == ["data"] * 8
    assert [f.timestamp for f in frames] == pytest.approx([T0 + k * 0.020 for k in range(8)])
    assert counters.dropped == {} and counters.lost == 0
    assert_well_formed(frames)


def test_single_loss_is_concealed_with_fec() -> None:
    buffer, counters, decoder = make()
    frames = feed(buffer, [0, 1, 2, 3, 4, 6, 7, 8, 9])
    assert len(frames) == 10
    assert [f.concealed for f in frames] == [False] * 5 + [True] + [False] * 4
    assert decoder.calls[5] == "fec"
    assert counters.concealed == 1 and counters.lost == 1
    assert frames[5].timestamp == pytest.approx(T0 + 0.100)
    assert_well_formed(frames)


def test_burst_is_concealed_with_plc_then_fec() -> None:
    buffer, counters, decoder = make(max_conceal=5)
    frames = feed(buffer, [0, 1, 2, 6, 7, 8])
    assert len(frames) == 9
    assert decoder.calls == ["data"] * 3 + ["plc", "plc", "fec"] + ["data"] * 3
    assert counters.concealed == 3 and counters.lost == 3
    assert_well_formed(frames)


def test_burst_longer_than_max_conceal_is_lost_not_concealed() -> None:
    buffer, counters, decoder = make(max_conceal=2)
    frames = feed(buffer, [0, 1, 2, 6, 7, 8])
    assert len(frames) == 6 and not any(f.concealed for f in frames)
    assert "plc" not in decoder.calls and "fec" not in decoder.calls
    assert counters.lost == 3 and counters.concealed == 0
    assert_well_formed(frames)


def test_trailing_loss_is_not_concealed() -> None:
    buffer, counters, _ = make()
    frames = feed(buffer, [0, 1, 2])
    assert len(frames) == 3 and counters.concealed == 0


def test_duplicate_and_late_packets_are_dropped() -> None:
    buffer, counters, _ = make()
    out = feed(buffer, [0, 1, 2, 2, 3, 5, 6, 7, 8])  # 2 twice while held; 4 missing -> concealed
    out += buffer.push(1, 960, TONE[1], T0 + 2.0 - 0.4)  # already played
    out += buffer.push(4, 3840, TONE[4], T0 + 2.0 - 0.39)  # concealed before it arrived
    assert counters.dropped == {"duplicate": 2, "late": 1}
    assert len(out) == 9 and counters.concealed == 1


def test_sequence_wraps_at_65535() -> None:
    buffer, counters, decoder = make()
    order = [0, 1, 3, 2, 4, 5, 6, 7]  # crosses 65535 -> 0 at offset 3
    frames = feed(buffer, order, base_seq=65533, base_ts=0xFFFF_FFFF - 1920)
    assert len(frames) == 8 and not any(f.concealed for f in frames)
    assert decoder.calls == ["data"] * 8
    assert [f.timestamp for f in frames] == pytest.approx([T0 + k * 0.020 for k in range(8)])
    assert counters.lost == 0 and counters.dropped == {}
    assert_well_formed(frames)


def test_loss_across_the_wrap_is_concealed() -> None:
    buffer, counters, decoder = make()
    frames = feed(buffer, [0, 1, 2, 4, 5, 6], base_seq=65533)  # sequence 0 is missing
    assert len(frames) == 7 and frames[3].concealed and decoder.calls[3] == "fec"
    assert counters.concealed == 1


def test_talk_spurt_resets_without_concealment() -> None:
    buffer, counters, decoder = make()
    first = feed(buffer, [0, 1, 2, 3])
    # 2 s of silence; the client sent two more packets we never got, then speaks again with the
    # RTP clock advanced by the silence.
    resume = T0 + 3.0
    out: list[AudioFrame] = []
    for i, k in enumerate(range(6, 10)):
        out += buffer.push(k, k * 960 + 96_000, TONE[k], resume + i * 0.020)
    out += buffer.flush(resume + 1.0)
    assert len(first) == 4 and len(out) == 4
    assert not any(f.concealed for f in out) and "plc" not in decoder.calls and "fec" not in decoder.calls
    assert counters.lost == 2 and counters.concealed == 0
    assert out[0].timestamp == pytest.approx(resume)  # re-anchored on arrival
    assert [f.frame_id for f in first + out] == list(range(8))
    assert_well_formed(first + out)


def test_straggler_from_the_previous_spurt_is_late() -> None:
    buffer, counters, _ = make()
    feed(buffer, [0, 1, 2, 4])  # 3 concealed
    resume = T0 + 3.0
    out = buffer.push(10, 9600 + 96_000, TONE[10], resume)
    out += buffer.push(3, 2880, TONE[3], resume + 0.005)  # from the old spurt, already concealed
    out += buffer.flush(resume + 1.0)
    assert len(out) == 1 and not out[0].concealed
    # lost: 3 (concealed) + 5..9 (gone across the silence, not concealed)
    assert counters.dropped == {"late": 1} and counters.lost == 6 and counters.concealed == 1


def test_silence_within_a_spurt_keeps_rtp_timing() -> None:
    buffer, _, _ = make()
    out = buffer.push(0, 0, TONE[0], T0) + buffer.flush(T0 + 0.1)
    # The sender paused 200 ms (RTP clock advanced) and the packet arrived 10 ms late.
    out += buffer.push(1, 960 + 9600, TONE[1], T0 + 0.230) + buffer.flush(T0 + 1.0)
    assert [f.timestamp for f in out] == pytest.approx([T0, T0 + 0.220])


def test_corrupt_payload_is_counted_not_raised() -> None:
    buffer, counters, _ = make()
    out = buffer.push(0, 0, TONE[0], T0) + buffer.push(1, 960, b"\xff\xff\xff\xff", T0 + 0.02)
    out += buffer.push(2, 1920, TONE[2], T0 + 0.04) + buffer.flush(T0 + 1.0)
    assert len(out) == 2
    assert counters.dropped == {"opus_decode_failed": 1}


def test_sequence_restart_is_not_counted_as_late() -> None:
    buffer, counters, _ = make()
    first = feed(buffer, [0, 1, 2, 3], base_seq=5000)
    second = feed(buffer, [0, 1, 2], base_seq=100, start=T0 + 0.1)
    assert len(first) == 4 and len(second) == 3
    assert counters.dropped == {} and counters.lost == 0
    assert_well_formed(first + second)


def test_pending_since_is_where_the_next_frame_can_start_while_a_gap_is_waited_for() -> None:
    buffer, _, _ = make()
    assert buffer.pending_since() is None
    out = buffer.push(0, 0, TONE[0], T0)
    assert len(out) == 1 and buffer.pending_since() is None  # in order: nothing held
    assert buffer.push(2, 2 * 960, TONE[2], T0 + 0.040) == []  # packet 1 is missing: wait for it
    assert buffer.pending_since() == pytest.approx(out[0].timestamp + 0.020)
    released = buffer.flush(T0 + 0.040 + 0.060)
    assert [f.concealed for f in released] == [True, False]  # FEC for 1, then 2
    assert released[0].timestamp == pytest.approx(out[0].timestamp + 0.020)  # where pending_since said
    assert buffer.pending_since() is None


def test_opus_silence_frames_mark_the_end_of_a_transmission() -> None:
    buffer, _, _ = make()
    out: list[AudioFrame] = []
    for k in range(8):  # three frames of tone, then a client's five silence frames
        payload = TONE[k % len(TONE)] if k < 3 else b"\xf8\xff\xfe"
        out += buffer.push(k, k * 960, payload, T0 + k * 0.02)
    assert [f.end_of_transmission for f in out] == [False] * 3 + [True] * 5


def assert_contiguous(frames: list[AudioFrame]) -> None:
    """Frames in order, never overlapping, without a gap (a continuous stream)."""
    for a, b in zip(frames, frames[1:], strict=False):
        assert b.timestamp == pytest.approx(a.timestamp + a.duration)


def test_a_late_first_packet_does_not_stamp_the_spurt_late() -> None:
    # The reader thread ran 50 ms late as a talk spurt began: packets 0..2 (sent at T0, +20, +40 ms)
    # were stamped on arrival together at T0 + 50 ms; from packet 3 on, every one is on time.
    buffer, counters, _ = make()
    arrivals = [T0 + 0.050] * 3 + [T0 + k * 0.020 for k in range(3, 12)]
    frames: list[AudioFrame] = []
    late_by: dict[int, float] = {}  # packet -> its frame's timestamp minus the packet's arrival
    for k, arrival in enumerate(arrivals):
        released = buffer.push(k, k * 960, TONE[k % len(TONE)], arrival)
        frames += released
        for f in released:
            late_by[k] = f.timestamp - arrival
    assert frames[0].timestamp == pytest.approx(T0 + 0.050)  # nothing said yet that it was late
    assert_contiguous(frames)
    # Once on-time packets showed the anchor was late, no frame is stamped later than its packet
    # arrived by more than one frame (before, every frame of the spurt was 50 ms late).
    assert 2 not in late_by  # its time was covered already: cut whole
    assert all(late <= 0.020 + 1e-9 for k, late in late_by.items() if k >= 4)
    # The step back was cut from the audio once (30 ms: 50 late, less the 20 ms allowed), not hidden.
    assert counters.trimmed_ms == pytest.approx(30.0)
    assert sum(f.duration for f in frames) == pytest.approx(12 * 0.020 - 0.030)


def test_a_short_pause_absorbs_the_anchor_moving_earlier() -> None:
    # A sender whose RTP clock overshoots each pause by 15 ms, with pauses shorter than a talk spurt's
    # timeout: the anchor is kept, and the overshoot used to add up (15, 30, 45 ... ms late).
    buffer, counters, _ = make()
    firsts: list[tuple[float, float]] = []  # (timestamp, arrival) of each utterance's first frame
    seq, ts, now = 0, 0, T0
    for _ in range(6):
        for k in range(10):
            out = buffer.push(seq + k, ts + k * 960, TONE[k % len(TONE)], now + k * 0.020)
            if k == 0:
                firsts.append((out[0].timestamp, now))
        seq += 10
        ts += 10 * 960 + round((0.400 + 0.015) * 48_000)
        now += 10 * 0.020 + 0.400
    assert [t - arrival for t, arrival in firsts] == pytest.approx([0.0] * 6, abs=1e-6)
    assert counters.trimmed_ms == 0.0  # each step back fell inside a pause: no audio cut
