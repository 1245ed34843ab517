"""The per-speaker pipeline end to end: Discord frames in, processed capture and speech events out."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import numpy as np
import pytest

from openab_voice.audio import (
    AudioBufferOverrun,
    AudioFrame,
    AudioPipelineStarted,
    AudioPipelineStopped,
    FrontEnd,
    FrontEndSettings,
    ProcessedFrame,
    SpeechEnded,
    SpeechStarted,
    scenes,
)
from openab_voice.audio.events import CapturePaused
from openab_voice.audio.pipeline import SpeakerPipeline
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.errors import LifecycleError


def make(settings: FrontEndSettings | None = None) -> tuple[FrontEnd, FakeClock, list[Event]]:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    return FrontEnd(settings or FrontEndSettings(), bus=bus, clock=clock, session_id="s-1"), clock, events


def two_speakers(t0: float) -> dict[str, list[AudioFrame]]:
    alice = scenes.place(scenes.load_clip("alice"), at_s=0.3, total_s=5.0)
    bob = scenes.place(scenes.load_clip("bob"), at_s=0.8, total_s=5.0)
    return {
        "alice": scenes.discord_frames(alice, speaker_id="alice", start_time=t0),
        "bob": scenes.discord_frames(bob, speaker_id="bob", start_time=t0, first_frame_id=1000),
    }


def test_frames_in_processed_capture_and_speech_events_out() -> None:
    frontend, clock, events = make()
    frames = two_speakers(clock.monotonic())
    outputs: dict[str, list[ProcessedFrame]] = {"alice": [], "bob": []}
    for i in range(len(frames["alice"])):
        for name in ("alice", "bob"):
            frontend.push_capture(frames[name][i])
        for out in frontend.process_pending():
            outputs[out.frame.speaker_id or "?"].append(out)
        clock.advance(0.02)
    assert set(frontend.speakers) == {"alice", "bob"}
    started = [e for e in events if isinstance(e, AudioPipelineStarted)]
    assert sorted(e.speaker_id for e in started) == ["alice", "bob"]
    assert all(not e.degraded and e.apm_provider == "webrtc" and e.vad_provider == "silero" for e in started)
    for name, first_id in (("alice", 0), ("bob", 1000)):
        out = outputs[name]
        # One processed frame per received frame, except the very first: the resampler's start-up
        # look-ahead leaves less than one 10 ms chunk, which then goes out with the second frame.
        assert len(out) == len(frames[name]) - 1
        assert [o.frame.frame_id for o in out] == [first_id + 1 + i for i in range(len(out))]
        assert all(o.frame.sample_rate == 16_000 and o.frame.channels == 1 for o in out)
        assert all(len(o.frame.pcm) == 640 for o in out[1:])  # 20 ms at 16 kHz mono
        stamps = [o.frame.timestamp for o in out]
        assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
        speech = np.array([o.user_speech for o in out])
        assert speech.any() and not speech[:10].any() and not speech[-10:].any()
        starts = [e for e in events if isinstance(e, SpeechStarted) and e.speaker_id == name]
        ends = [e for e in events if isinstance(e, SpeechEnded) and e.speaker_id == name]
        assert len(starts) == 1 and len(ends) == 1 and starts[0].session_id == "s-1"
    alice_start = next(e for e in events if isinstance(e, SpeechStarted) and e.speaker_id == "alice")
    bob_start = next(e for e in events if isinstance(e, SpeechStarted) and e.speaker_id == "bob")
    assert bob_start.audio_time - alice_start.audio_time > 0.3


def test_render_reference_is_fanned_out_to_every_speaker() -> None:
    frontend, clock, _ = make()
    t0 = clock.monotonic()
    far = scenes.discord_frames(scenes.load_clip("far_end")[:16_000], speaker_id=None, start_time=t0)
    quiet = scenes.silence(1.0)
    caps = {n: scenes.discord_frames(quiet, speaker_id=n, start_time=t0) for n in ("a", "b", "c")}
    last: dict[str, ProcessedFrame] = {}
    for i, r in enumerate(far):
        frontend.push_render(r)
        for frames in caps.values():
            frontend.push_capture(frames[i])
        for out in frontend.process_pending():
            last[out.frame.speaker_id or "?"] = out
        clock.advance(0.02)
    assert set(last) == {"a", "b", "c"}
    assert all(o.bot_speaking for o in last.values())


def test_remove_speaker_ends_speech_and_frees_the_pipeline() -> None:
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("bob"), speaker_id="bob", start_time=clock.monotonic())
    for frame in frames[:60]:
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    assert any(isinstance(e, SpeechStarted) for e in events)
    pipeline = frontend.pipeline("bob")
    assert pipeline is not None
    frontend.remove_speaker("bob")
    assert frontend.speakers == () and frontend.pipeline("bob") is None
    frontend.process_pending()
    ended = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(ended) == 1 and ended[0].reason == "speaker_left"
    stopped = [e for e in events if isinstance(e, AudioPipelineStopped)]
    assert len(stopped) == 1 and stopped[0].frames == 60 and stopped[0].reason == "speaker_left"
    assert pipeline.apm._apm is None  # the native APM was released
    # Frames after a removal start a new pipeline (the user came back).
    frontend.push_capture(frames[60])
    frontend.process_pending()
    assert frontend.pipeline("bob") is not None and frontend.pipeline("bob") is not pipeline


def test_speech_ends_when_the_client_stops_sending() -> None:
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames[:50]:  # cut mid-sentence: Discord sends nothing more
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    assert any(isinstance(e, SpeechStarted) for e in events)
    clock.advance(0.5)
    frontend.process_pending()
    ended = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(ended) == 1 and ended[0].reason == "capture_stopped"
    # The end is where the audio stopped (the last frame's end, less the resampler look-ahead), or
    # where the VAD's quiet run began if that was before.
    assert frames[49].timestamp - 0.2 <= ended[0].audio_time <= frames[49].timestamp + 0.02


def test_capture_ring_overrun_is_reported_and_never_blocks() -> None:
    frontend, clock, events = make(FrontEndSettings(capture_ring_frames=10))
    frames = scenes.discord_frames(scenes.silence(1.0), speaker_id="a", start_time=clock.monotonic())
    for frame in frames:  # a stalled consumer: nothing processes
        frontend.push_capture(frame)
    outputs = frontend.process_pending()
    # Only the newest ten frames were left to process (the first yields no chunk yet, see above).
    assert [o.frame.frame_id for o in outputs] == [f.frame_id for f in frames[-9:]]
    overruns = [e for e in events if isinstance(e, AudioBufferOverrun)]
    assert overruns and overruns[0].ring == "capture" and overruns[0].speaker_id == "a"
    assert overruns[0].session_id == "s-1"


async def test_started_front_end_streams_processed_capture() -> None:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    frames = scenes.discord_frames(
        scenes.place(scenes.load_clip("greeting"), at_s=0.2, total_s=2.5),
        speaker_id="g",
        start_time=clock.monotonic(),
    )
    received: list[ProcessedFrame] = []
    async with FrontEnd(FrontEndSettings(processed_queue_frames=1000), bus=bus, clock=clock) as frontend:
        stream = frontend.subscribe("g")
        other = frontend.subscribe("someone-else")
        for start in range(0, len(frames), 10):
            for frame in frames[start : start + 10]:
                frontend.push_capture(frame)
            expected = min(start + 10, len(frames)) - 1
            for _ in range(500):  # the processing task sleeps on the injected clock
                while len(stream):
                    received.append(await anext(stream))
                if len(received) >= expected:
                    break
                clock.advance(0.02)
                await asyncio.sleep(0.002)  # real time: the front end's own thread processes the step
            assert len(received) == expected
    assert [o.frame.frame_id for o in received] == [f.frame_id for f in frames[1:]]
    assert any(o.user_speech for o in received)
    assert len(other) == 0
    # aclose ended the subscriptions and the speaker's pipeline.
    assert [o async for o in stream] == []
    assert any(isinstance(e, AudioPipelineStopped) and e.reason == "closed" for e in events)
    assert any(isinstance(e, SpeechStarted) for e in events)


def test_slow_subscriber_loses_oldest_frames_with_an_overrun_event() -> None:
    frontend, clock, events = make()
    stream = frontend.subscribe("a", maxsize=5)
    for frame in scenes.discord_frames(scenes.silence(0.4), speaker_id="a", start_time=clock.monotonic()):
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    assert len(stream) == 5 and stream.dropped == 14  # 19 frames out (see the first test)
    first = stream.get_nowait()
    assert first is not None and first.frame.frame_id == 15
    overruns = [e for e in events if isinstance(e, AudioBufferOverrun) and e.ring == "processed"]
    assert overruns and overruns[0].capacity == 5


def receive_in_real_time(frontend: FrontEnd, clock: FakeClock, frames: list[AudioFrame]) -> None:
    """Each frame pushed with the receiver's watermark right behind it, processed, 20 ms apart."""
    for frame in frames:
        frontend.push_capture(frame)
        frontend.advance_capture_watermark(frame.timestamp + frame.duration)
        frontend.process_pending()
        clock.advance(0.02)


def test_a_late_receiver_delays_the_capture_stopped_end_but_never_invents_one() -> None:
    """The receiver's watermark, not the wall clock, says whether a speaker stopped sending."""
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    receive_in_real_time(frontend, clock, frames[:50])
    assert any(isinstance(e, SpeechStarted) for e in events)
    # The receive worker falls 1 s behind (CPU contention): the wall clock moves, the watermark
    # does not, and the speaker still talks; no end of speech may be declared meanwhile.
    clock.advance(1.0)
    frontend.process_pending()
    assert not [e for e in events if isinstance(e, SpeechEnded)]
    # It catches up and delivers the rest of the sentence: one utterance, never two.
    for frame in frames[50:]:
        frontend.push_capture(frame)
        frontend.advance_capture_watermark(frame.timestamp + frame.duration)
        frontend.process_pending()
    assert not [e for e in events if isinstance(e, SpeechEnded) and e.reason == "capture_stopped"]
    # Once the watermark passes the minimum silence after the last frame, the end is real.
    end = frames[-1].timestamp + frames[-1].duration
    clock.advance(end + 0.5 - clock.monotonic())
    frontend.advance_capture_watermark(end + 0.5)
    frontend.process_pending()
    ended = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(ended) == 1
    assert ended[0].audio_time <= end


async def test_started_front_end_processes_on_its_own_thread_while_the_loop_is_blocked() -> None:
    clock = FakeClock()
    frontend = FrontEnd(FrontEndSettings(), bus=EventBus(), clock=clock)
    frames = scenes.discord_frames(scenes.silence(0.5), speaker_id="a", start_time=clock.monotonic())
    ran_on: list[str] = []
    async with frontend:
        for frame in frames:
            frontend.push_capture(frame)
        # Block the event loop (a synchronous wait, on purpose): processing must not need it.
        deadline = time.monotonic() + 5.0
        while (pipeline := frontend.pipeline("a")) is None or pipeline.frames < len(frames):
            assert time.monotonic() < deadline, "the front end did not process without the event loop"
            # real time: the loop's thread is held while the front end's thread works
            time.sleep(0.005)  # noqa: ASYNC251 - holding the loop is the point
        ran_on.append(threading.current_thread().name)
    assert pipeline.frames == len(frames)
    assert ran_on == [threading.main_thread().name]  # the wait above really held the loop's thread


def test_frames_pushed_while_a_batch_runs_are_never_taken_for_silence() -> None:
    """The race that split utterances under load: the receiver pushes frames and raises the watermark
    after the front end drained its rings but before it checked for idle speakers."""
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    receive_in_real_time(frontend, clock, frames[:30])
    assert any(isinstance(e, SpeechStarted) for e in events)
    # The front end fell 0.6 s behind; while its next batch runs, 30 more frames and their
    # watermark arrive (a gate inside the drain stands in for the receiver thread).
    ring = frontend._speakers["a"].ring
    real_drain = ring.drain
    late = frames[30:60]

    def drain_then_receiver_runs() -> list[AudioFrame]:
        drained = real_drain()
        for frame in late:
            frontend.push_capture(frame)
        frontend.advance_capture_watermark(late[-1].timestamp + late[-1].duration)
        return drained

    ring.drain = drain_then_receiver_runs  # type: ignore[method-assign]
    clock.advance(late[-1].timestamp + 0.02 - clock.monotonic())
    frontend.process_pending()
    ring.drain = real_drain  # type: ignore[method-assign]
    assert not [e for e in events if isinstance(e, SpeechEnded)], "speech still arriving was ended"
    frontend.process_pending()  # the late frames: still one utterance
    assert not [e for e in events if isinstance(e, SpeechEnded)]


def test_a_capture_gap_inside_speech_is_reported_once_and_ends_nothing_by_itself() -> None:
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames[:50]:
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    frontend.process_pending()
    assert not [e for e in events if isinstance(e, CapturePaused)]  # 20 ms: the next packet is due
    clock.advance(0.1)
    frontend.process_pending()
    clock.advance(0.05)
    frontend.process_pending()
    (paused,) = [e for e in events if isinstance(e, CapturePaused)]
    assert paused.speaker_id == "a"
    assert frames[49].timestamp <= paused.audio_time <= frames[49].timestamp + 0.02
    assert not [e for e in events if isinstance(e, SpeechEnded)]
    # The packets were only late (they come in one burst): the speech goes on, and a later gap is
    # reported again.
    for frame in frames[50:60]:
        frontend.push_capture(frame)
    frontend.process_pending()
    clock.advance(0.1)
    frontend.process_pending()
    assert len([e for e in events if isinstance(e, CapturePaused)]) == 2
    assert not [e for e in events if isinstance(e, SpeechEnded)]


def _trailer(after: AudioFrame, count: int = 5) -> list[AudioFrame]:
    """A client's end of transmission: ``count`` Opus silence frames (decoded: zeros) after ``after``."""
    return [
        dataclasses.replace(
            after,
            pcm=bytes(len(after.pcm)),
            timestamp=after.timestamp + (i + 1) * after.duration,
            frame_id=after.frame_id + i + 1,
            end_of_transmission=True,
        )
        for i in range(count)
    ]


def test_after_a_clients_silence_trailer_the_vad_ends_the_speech_on_filled_silence() -> None:
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    sent = frames + _trailer(frames[-1])
    out: list[ProcessedFrame] = []
    for frame in sent:
        frontend.push_capture(frame)
        out += frontend.process_pending()
        clock.advance(0.02)
    captured_to = sent[-1].timestamp + sent[-1].duration
    for _ in range(40):  # nothing more comes: the client stopped transmitting
        out += frontend.process_pending()
        clock.advance(0.02)
    (ended,) = [e for e in events if isinstance(e, SpeechEnded)]
    # The quiet began before the packets stopped: the VAD ends the speech a minimum silence after
    # it, on silence filled in where nothing came, sooner than the capture-stopped rule would.
    assert ended.reason == "silence" and ended.audio_time < captured_to
    assert ended.at < captured_to + 0.4
    filled = [f for f in out if f.frame.concealed]
    assert len(filled) >= 5 and min(f.frame.timestamp for f in filled) > captured_to - 0.025  # resampler
    (marked,) = [f for f in out if f.speech_end is not None]
    assert marked.speech_end == ended.audio_time and not marked.user_speech
    assert max(f.frame.timestamp for f in out) < captured_to + 0.4  # nothing filled once it ended


def test_without_the_trailer_no_silence_is_invented_and_a_new_transmission_is_kept_whole() -> None:
    frontend, clock, events = make()
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames[:50]:  # packets stop mid-word: maybe only late
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    clock.advance(0.2)
    assert frontend.process_pending() == []  # nothing filled in
    # With the trailer, silence is filled; a transmission that starts inside the filled time is
    # moved after it, never dropped.
    for frame in frames[50:60] + _trailer(frames[59]):
        frontend.push_capture(frame)
        frontend.process_pending()
    clock.advance(0.3)
    filled = frontend.process_pending()
    assert filled and all(f.frame.concealed for f in filled)
    fill_end = max(f.frame.timestamp + f.frame.duration for f in filled)
    early = dataclasses.replace(frames[60], timestamp=frames[59].timestamp + 0.12, frame_id=10_000)
    frontend.push_capture(early)
    (kept,) = frontend.process_pending()
    assert not kept.frame.concealed and kept.frame.timestamp >= fill_end - 0.021


@pytest.mark.parametrize("workers", [1, 2])
def test_speakers_spread_over_shards_keep_their_order_and_all_get_the_render(workers: int) -> None:
    frontend, clock, events = make(FrontEndSettings(workers=workers))
    t0 = clock.monotonic()
    far = scenes.discord_frames(scenes.load_clip("far_end")[:32_000], speaker_id=None, start_time=t0)
    frames = two_speakers(t0)
    outputs: dict[str, list[ProcessedFrame]] = {"alice": [], "bob": []}
    for i, render in enumerate(far):
        frontend.push_render(render)
        for name in ("alice", "bob"):
            frontend.push_capture(frames[name][i])
        for out in frontend.process_pending():
            outputs[out.frame.speaker_id or "?"].append(out)
        clock.advance(0.02)
    for name, first_id in (("alice", 0), ("bob", 1000)):
        out = outputs[name]
        assert [o.frame.frame_id for o in out] == [first_id + 1 + i for i in range(len(out))]
        assert out[-1].bot_speaking  # the render reached this speaker's shard too
    started = [e for e in events if isinstance(e, AudioPipelineStarted)]
    assert sorted(e.speaker_id for e in started) == ["alice", "bob"]


async def test_two_shards_process_their_speakers_on_two_threads_while_the_loop_is_blocked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    frontend = FrontEnd(FrontEndSettings(workers=2), bus=EventBus(), clock=clock)
    threads: dict[str, set[str]] = {"a": set(), "b": set()}
    process = SpeakerPipeline.process

    def recording(self: SpeakerPipeline, frame: AudioFrame) -> ProcessedFrame | None:
        threads[self.speaker_id].add(threading.current_thread().name)
        return process(self, frame)

    monkeypatch.setattr(SpeakerPipeline, "process", recording)
    frames = {
        n: scenes.discord_frames(scenes.silence(0.5), speaker_id=n, start_time=clock.monotonic())
        for n in "ab"
    }
    async with frontend:
        for a, b in zip(frames["a"], frames["b"], strict=True):
            frontend.push_capture(a)
            frontend.push_capture(b)
        deadline = time.monotonic() + 5.0
        while any((p := frontend.pipeline(n)) is None or p.frames < len(frames[n]) for n in "ab"):
            assert time.monotonic() < deadline, "the shards did not process without the event loop"
            # real time: the loop's thread is held while the shards' threads work
            time.sleep(0.005)  # noqa: ASYNC251 - holding the loop is the point
    assert threads == {"a": {"openab-voice-frontend"}, "b": {"openab-voice-frontend-1"}}


async def test_a_closed_front_end_refuses_to_start() -> None:
    frontend, _, _ = make()
    await frontend.aclose()
    await frontend.aclose()  # idempotent
    with pytest.raises(LifecycleError) as caught:
        frontend.start()
    assert caught.value.code == "LIFECYCLE_CLOSED"
    assert caught.value.message == "Cannot start, as the audio front end has been closed."
