"""Bounded rings (overrun) and capture/render alignment (drift)."""

from __future__ import annotations

import numpy as np

from openab_voice.audio.drift import DriftMonitor
from openab_voice.audio.events import AudioBufferOverrun, AudioReferenceDrift, AudioReferenceRealigned
from openab_voice.audio.frame import AudioFrame
from openab_voice.audio.render import RenderAligner
from openab_voice.audio.resample import Chunk
from openab_voice.audio.ring import FrameRing
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock


def frame(i: int, *, ts: float | None = None, speaker: str | None = "u1") -> AudioFrame:
    return AudioFrame(
        pcm=bytes(1920 * 2),
        sample_rate=48_000,
        channels=2,
        timestamp=ts if ts is not None else 100.0 + i * 0.02,
        frame_id=i,
        speaker_id=speaker,
    )


def test_ring_keeps_metadata_and_order() -> None:
    events: list[Event] = []
    ring = FrameRing("capture", 4, clock=FakeClock(), emit=events.append, speaker_id="u1")
    for i in range(3):
        assert ring.push(frame(i))
    assert len(ring) == 3
    assert abs(ring.duration - 0.06) < 1e-9
    first = ring.pop()
    assert first is not None
    assert (first.frame_id, first.sample_rate, first.channels) == (0, 48_000, 2)
    assert first.timestamp == 100.0 and abs(first.duration - 0.02) < 1e-12
    assert [f.frame_id for f in ring.drain()] == [1, 2]
    assert ring.pop() is None
    assert events == []


def test_overrun_drops_oldest_and_reports_rate_limited() -> None:
    clock = FakeClock()
    events: list[Event] = []
    ring = FrameRing("capture", 3, clock=clock, emit=events.append, speaker_id="u1")
    for i in range(5):
        ring.push(frame(i))
    # The two oldest unread frames went; the newest stayed.
    assert [f.frame_id for f in ring.drain()] == [2, 3, 4]
    overruns = [e for e in events if isinstance(e, AudioBufferOverrun)]
    assert len(overruns) == 1  # first drop reported at once, the second within the same second
    assert overruns[0].event_type == "audio_buffer_overrun"
    assert (overruns[0].ring, overruns[0].speaker_id, overruns[0].capacity) == ("capture", "u1", 3)
    assert overruns[0].dropped == 1
    ring.poll()
    assert len(events) == 1  # still inside the report interval
    clock.advance(1.0)
    ring.poll()
    assert isinstance(events[-1], AudioBufferOverrun)
    assert events[-1].dropped == 1 and events[-1].dropped_total == 2
    assert ring.dropped_total == 2 and ring.pushed_total == 5


def test_frames_already_popped_are_never_dropped() -> None:
    ring = FrameRing("render", 2, clock=FakeClock(), emit=lambda e: None)
    ring.push(frame(0, speaker=None))
    held = ring.pop()
    for i in range(1, 5):
        ring.push(frame(i, speaker=None))
    assert held is not None and held.frame_id == 0
    assert [f.frame_id for f in ring.drain()] == [3, 4]


def test_out_of_order_frames_are_rejected_not_queued() -> None:
    ring = FrameRing("capture", 8, clock=FakeClock(), emit=lambda e: None)
    assert ring.push(frame(5))
    assert not ring.push(frame(4))  # frame id going backwards
    assert not ring.push(frame(6, ts=50.0))  # timestamp going backwards
    assert ring.out_of_order_total == 2
    assert [f.frame_id for f in ring.drain()] == [5]


def _aligner(events: list[Event], clock: FakeClock) -> tuple[RenderAligner, DriftMonitor]:
    drift = DriftMonitor(
        "u1", tolerance_s=0.06, recovery_s=0.3, low_confidence=0.5, clock=clock, emit=events.append
    )
    return RenderAligner(chunk_s=0.01, tolerance_s=0.06, gap_s=0.06, history_s=1.0, drift=drift), drift


def _chunk(ts: float, value: int) -> Chunk:
    return Chunk(ts, np.full(160, value, dtype=np.int16))


def test_aligned_streams_pair_in_sequence_without_drift() -> None:
    events: list[Event] = []
    aligner, drift = _aligner(events, FakeClock())
    for i in range(20):
        aligner.add(_chunk(10.0 + i * 0.01 + (0.003 if i % 2 else 0.0), i))  # jittery stamps
    taken = [aligner.take(10.0 + i * 0.01) for i in range(20)]
    assert [int(t.chunk.samples[0]) for t in taken if t.chunk is not None] == list(range(20))
    assert drift.aligned and drift.confidence == 1.0 and events == []


def test_render_idle_feeds_nothing_and_is_not_drift() -> None:
    events: list[Event] = []
    aligner, drift = _aligner(events, FakeClock())
    aligner.add(_chunk(12.0, 1))  # the bot starts talking two seconds later
    assert aligner.take(10.0).chunk is None
    assert aligner.take(10.01).skew_s is None
    assert drift.aligned and events == []


def test_clock_drift_is_reported_lowers_confidence_and_recovers() -> None:
    events: list[Event] = []
    aligner, drift = _aligner(events, FakeClock())
    # The render clock runs 2.5 % fast relative to capture: skew grows by 0.25 ms per chunk.
    render_ts, capture_ts = 10.0, 10.0
    for _ in range(300):
        aligner.add(_chunk(render_ts, 1))
        aligner.take(capture_ts)
        render_ts += 0.01025
        capture_ts += 0.01
        if events:
            break
    assert len(events) == 1 and isinstance(events[0], AudioReferenceDrift)
    assert events[0].event_type == "audio_reference_drift"
    assert events[0].skew_ms < -60.0 and events[0].tolerance_ms == 60.0
    assert capture_ts - 10.0 > 2.3  # 60 ms of 0.25 ms steps
    assert not drift.aligned and drift.confidence == 0.5
    # The clocks agree again: the held-back reference realigns and confidence returns.
    for _ in range(100):
        aligner.add(_chunk(render_ts, 2))
        aligner.take(capture_ts)
        render_ts += 0.01
        capture_ts += 0.01
    assert drift.aligned and drift.confidence == 1.0
    assert [type(e) for e in events] == [AudioReferenceDrift, AudioReferenceRealigned]
    assert isinstance(events[1], AudioReferenceRealigned) and events[1].drifted_for_ms >= 300.0


def test_drift_lowers_confidence_while_it_lasts() -> None:
    events: list[Event] = []
    clock = FakeClock()
    drift = DriftMonitor(
        "u1", tolerance_s=0.06, recovery_s=0.3, low_confidence=0.5, clock=clock, emit=events.append
    )
    drift.observe(0.01, 1.0)
    assert drift.confidence == 1.0
    drift.observe(0.09, 1.01)
    assert not drift.aligned and drift.confidence == 0.5
    drift.observe(0.0, 1.02)
    drift.observe(0.0, 1.2)
    assert drift.confidence == 0.5  # aligned for 180 ms only
    drift.observe(0.0, 1.33)
    assert drift.aligned and drift.confidence == 1.0
    assert [type(e) for e in events] == [AudioReferenceDrift, AudioReferenceRealigned]
    assert events[0].speaker_id == "u1" and events[0].skew_ms == 90.0


def test_lagging_reference_is_resynchronised() -> None:
    events: list[Event] = []
    aligner, drift = _aligner(events, FakeClock())
    for i in range(90):  # the playback path stamps render in real time, ahead of capture processing
        aligner.add(_chunk(10.0 + i * 0.01, i))
    # Capture skips 10 ms every 50 ms (lost packets without concealment): the reference falls behind.
    capture_ts = 10.0
    taken = []
    for step in range(40):
        taken.append((capture_ts, aligner.take(capture_ts)))
        capture_ts += 0.02 if step % 5 == 4 else 0.01
    lagging = [e for e in events if isinstance(e, AudioReferenceDrift)]
    assert lagging and lagging[0].skew_ms > 60.0
    assert not drift.aligned
    # The pairing after the resync is the chunk nearest the capture time again.
    after = [(ts, t) for ts, t in taken if t.chunk is not None][-1]
    assert after[1].skew_s is not None and abs(after[1].skew_s) <= 0.06
