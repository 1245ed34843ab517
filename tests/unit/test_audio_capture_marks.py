"""The front end's data path: speech marks in band with the processed capture, and the speech sink
called in the same delivery as its batch's frames (the conversation's barge-in path)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from openab_voice.audio import FrontEnd, FrontEndSettings, ProcessedFrame, SpeechEnded, SpeechStarted, scenes
from openab_voice.audio.capture_stream import CaptureItem
from openab_voice.audio.events import CapturePaused
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock


def make() -> tuple[FrontEnd, FakeClock, list[Event]]:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    return FrontEnd(FrontEndSettings(), bus=bus, clock=clock, session_id="s-1"), clock, events


def drain(stream: object) -> list[CaptureItem]:
    out: list[CaptureItem] = []
    while (item := stream.get_nowait()) is not None:  # type: ignore[attr-defined]
        out.append(item)
    return out


def test_a_capture_stopped_end_comes_in_band_after_the_frames_before_it() -> None:
    frontend, clock, events = make()
    marked = frontend.subscribe_marked(maxsize=10_000)
    plain = frontend.subscribe(maxsize=10_000)
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames[:50]:  # then Discord sends nothing more: the speaker stopped mid-speech
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    for _ in range(40):
        clock.advance(0.02)
        frontend.process_pending()
    items = drain(marked)
    kinds = [type(i) for i in items]
    assert SpeechStarted in kinds and CapturePaused in kinds
    (ended,) = [i for i in items if isinstance(i, SpeechEnded)]
    assert ended.reason == "capture_stopped"
    # In band: the pause, then the end, after every frame; the start before the speech's frames.
    assert kinds.index(CapturePaused) < kinds.index(SpeechEnded)
    assert all(k is not ProcessedFrame for k in kinds[kinds.index(CapturePaused) :])
    start = kinds.index(SpeechStarted)
    first_speech = next(
        i for i, item in enumerate(items) if isinstance(item, ProcessedFrame) and item.user_speech
    )
    assert start < first_speech
    # The marks are the events the bus carried to observers (which also got the session id).
    published = [e for e in events if isinstance(e, SpeechStarted | SpeechEnded | CapturePaused)]
    assert [type(e) for e in published] == [type(i) for i in items if not isinstance(i, ProcessedFrame)]
    assert {e.session_id for e in published} == {"s-1"}
    # A plain subscription gets the same frames and no marks.
    assert drain(plain) == [i for i in items if isinstance(i, ProcessedFrame)]


def test_marks_are_never_dropped_when_the_consumer_falls_behind() -> None:
    frontend, clock, _ = make()
    marked = frontend.subscribe_marked(maxsize=5)
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames[:50]:
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    for _ in range(40):
        clock.advance(0.02)
        frontend.process_pending()
    assert len(marked) == 5 and marked.dropped > 0  # the oldest frames went
    items = drain(marked)
    assert [type(i) for i in items if not isinstance(i, ProcessedFrame)] == [
        SpeechStarted,
        CapturePaused,
        SpeechEnded,
    ]


def test_the_speech_sink_is_called_with_its_batch_after_the_frames() -> None:
    frontend, clock, events = make()
    marked = frontend.subscribe_marked(maxsize=10_000)
    seen: list[tuple[Event, list[CaptureItem], int]] = []

    def sink(event: SpeechStarted | SpeechEnded) -> None:
        # What the streams hold right now, and how many events the bus has carried so far.
        seen.append((event, list(marked._items), len(events)))

    frontend.add_speech_sink(sink)
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    for frame in frames:
        frontend.push_capture(frame)
        frontend.process_pending()
        if seen:
            break  # synchronous: the sink ran inside process_pending, before anything awaited
        clock.advance(0.02)
    ((event, queued, published),) = seen
    assert isinstance(event, SpeechStarted) and event.session_id == "s-1"
    # The onset's frame was already in the stream, the mark in band before it.
    marks = [i for i in queued if isinstance(i, SpeechStarted)]
    assert len(marks) == 1 and isinstance(queued[-1], ProcessedFrame) and queued[-1].user_speech
    assert queued.index(marks[0]) < len(queued) - 1
    # The sink runs before observers are told.
    assert not [e for e in events[:published] if isinstance(e, SpeechStarted)]
    assert [e for e in events if isinstance(e, SpeechStarted)] == [event]


async def test_on_its_thread_the_sink_runs_in_the_loop_callback_that_delivers_the_frames() -> None:
    clock = FakeClock()
    frontend = FrontEnd(FrontEndSettings(), bus=EventBus(), clock=clock)
    marked = frontend.subscribe_marked(maxsize=10_000)
    got: asyncio.Future[list[CaptureItem]] = asyncio.get_running_loop().create_future()

    def sink(event: SpeechStarted | SpeechEnded) -> None:
        if isinstance(event, SpeechStarted) and not got.done():
            got.set_result(list(marked._items))

    frontend.add_speech_sink(sink)
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    async with frontend:
        for frame in frames:
            frontend.push_capture(frame)
        queued = await asyncio.wait_for(got, 10.0)
    # Nothing consumed the stream in between: the onset frame and its mark were delivered by the
    # same callback that then called the sink (no queue hop, no task wake on the barge-in path).
    starts = [i for i, item in enumerate(queued) if isinstance(item, SpeechStarted)]
    assert len(starts) == 1
    onset = queued[starts[0] + 1]
    assert isinstance(onset, ProcessedFrame) and onset.user_speech


def test_a_failing_speech_sink_stops_neither_the_next_sink_nor_the_bus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    frontend, clock, events = make()
    later: list[Event] = []

    def broken(event: SpeechStarted | SpeechEnded) -> None:
        raise RuntimeError("consumer bug")

    frontend.add_speech_sink(broken)
    frontend.add_speech_sink(later.append)
    frames = scenes.discord_frames(scenes.load_clip("alice"), speaker_id="a", start_time=clock.monotonic())
    with caplog.at_level(logging.ERROR):
        for frame in frames:
            frontend.push_capture(frame)
            frontend.process_pending()
            clock.advance(0.02)
        clock.advance(1.0)
        frontend.process_pending()
    assert later and [type(e) for e in later] == [
        type(e) for e in events if isinstance(e, SpeechStarted | SpeechEnded)
    ]
    assert any("speech sink failed" in r.message for r in caplog.records)
