"""The streaming STT seam: the re-decode stream as a RecognizeStream, and a native streaming
recognizer plugged into the Transcriber in its place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import pytest

from openab_voice.audio.capture_stream import CaptureItem, SpeechMark
from openab_voice.audio.events import CapturePaused, SpeechEnded
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus import EventBus, Subscription
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.stt.events import TranscriptFinal, TranscriptPartial
from openab_voice.stt.recognize import RecognitionEvent, RecognizeStream
from openab_voice.stt.redecode_stream import RedecodeRecognizer
from openab_voice.stt.transcriber import Transcriber
from openab_voice.stt.utterances import TranscriberSettings
from tests.unit.test_stt_transcriber import RATE, ScriptedStt, timeline, words_by_length

E = TypeVar("E", bound=Event)


async def frames_of(frames: list[ProcessedFrame]) -> AsyncIterator[ProcessedFrame]:
    for f in frames:
        yield f


async def test_a_redecode_stream_yields_partials_then_one_final_then_ends() -> None:
    recognizer = RedecodeRecognizer(
        ScriptedStt(words_by_length("one two three")), clock=FakeClock(), settings=TranscriberSettings()
    )
    assert recognizer.sample_rate == RATE
    stream = recognizer.stream(session_id="s-9")
    for f in timeline("alice", 0.0, silence_s=0.2, speech_s=1.2, tail_s=0.0):
        stream.push_frame(f)
    stream.end_input()
    events = [e async for e in stream]
    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    assert [f.text for f in finals] == ["one two three"] and finals[0].session_id == "s-9"
    assert isinstance(events[-1], TranscriptFinal)  # nothing after the final, and the iteration ended
    assert [e async for e in stream] == []  # ended for good
    with pytest.raises(ValueError):
        stream.flush("alice")  # a speaker's segment ends at a time
    await stream.aclose()
    await stream.aclose()


async def test_flush_ends_a_speakers_segment_where_the_front_end_ended_it() -> None:
    stream = RedecodeRecognizer(
        ScriptedStt(words_by_length("packets just stopped")), clock=FakeClock()
    ).stream()
    for f in timeline("alice", 0.0, silence_s=0.2, speech_s=0.8, tail_s=0.0):
        stream.push_frame(f)
    stream.flush("alice", 1.0)  # capture stopped: no silent frame will come
    first_final: list[RecognitionEvent] = []
    async for event in stream:
        if isinstance(event, TranscriptFinal):
            first_final.append(event)
            break
    assert [e.text for e in first_final if isinstance(e, TranscriptFinal)] == ["packets just stopped"]
    await stream.aclose()


class NativeStream:
    """A provider that streams natively: it recognizes frames itself (here: one word per speech
    frame run), with no re-decoding anywhere."""

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id
        self.queue: asyncio.Queue[RecognitionEvent | None] = asyncio.Queue()
        self.speech: dict[str, int] = {}
        self.pauses: list[tuple[str, float]] = []
        self.flushes: list[tuple[str | None, float | None]] = []
        self.removed: list[str] = []
        self.closed = False
        self.inputs: list[str] = []  # what came in, in order: frame, pause, flush

    def push_frame(self, frame: ProcessedFrame) -> None:
        speaker = frame.frame.speaker_id or ""
        self.inputs.append("frame")
        if frame.user_speech:
            self.speech[speaker] = self.speech.get(speaker, 0) + 1
            if self.speech[speaker] % 10 == 0:
                self.queue.put_nowait(self._event(TranscriptPartial, speaker, frame.frame.timestamp))
        elif self.speech.pop(speaker, 0):
            self.queue.put_nowait(self._event(TranscriptFinal, speaker, frame.frame.timestamp))

    def _event(
        self, kind: type[TranscriptPartial | TranscriptFinal], speaker: str, t: float
    ) -> RecognitionEvent:
        common = dict(at=t, session_id=self.session_id, speaker_id=speaker, utterance_id=f"{speaker}:1")
        if kind is TranscriptPartial:
            return TranscriptPartial(**common, text="hel", stable=False, audio_start=0.0, audio_end=t)  # type: ignore[arg-type]
        return TranscriptFinal(
            **common, text="hello", audio_start=0.0, audio_end=t, partials=1, confidence=0.9
        )  # type: ignore[arg-type]

    def pause(self, speaker_id: str, audio_time: float) -> None:
        self.inputs.append("pause")
        self.pauses.append((speaker_id, audio_time))

    def flush(self, speaker_id: str | None = None, audio_time: float | None = None) -> None:
        self.inputs.append("flush")
        self.flushes.append((speaker_id, audio_time))

    def end_input(self) -> None:
        self.queue.put_nowait(None)

    def remove_speaker(self, speaker_id: str) -> None:
        self.removed.append(speaker_id)

    def __aiter__(self) -> NativeStream:
        return self

    async def __anext__(self) -> RecognitionEvent:
        event = await self.queue.get()
        if event is None:
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)


class NativeRecognizer:
    sample_rate = RATE

    def __init__(self) -> None:
        self.streams: list[NativeStream] = []

    def stream(self, *, session_id: str | None = None) -> RecognizeStream:
        self.streams.append(NativeStream(session_id))
        return self.streams[-1]


class CountingBus(EventBus):
    """A bus that counts its subscriptions by event type."""

    def __init__(self) -> None:
        super().__init__()
        self.subscribed: list[type[Event]] = []

    def subscribe(self, event_type: type[E], handler: Callable[[E], None]) -> Subscription:
        self.subscribed.append(event_type)
        return super().subscribe(event_type, handler)


def marked(frames: list[ProcessedFrame], marks: dict[int, list[SpeechMark]]) -> list[CaptureItem]:
    """``frames`` with ``marks[i]`` in band right after frame ``i``."""
    out: list[CaptureItem] = []
    for i, f in enumerate(frames):
        out.append(f)
        out.extend(marks.get(i, []))
    return out


async def items_of(items: list[CaptureItem]) -> AsyncIterator[CaptureItem]:
    for item in items:
        yield item


async def test_a_native_streaming_recognizer_plugs_into_the_transcriber() -> None:
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(
        Event, lambda e: events.append(e) if isinstance(e, TranscriptPartial | TranscriptFinal) else None
    )
    recognizer = NativeRecognizer()
    tr = Transcriber(recognizer, bus=bus, session_id="s-3")
    (stream,) = recognizer.streams
    assert stream.session_id == "s-3"
    frames = timeline("bob", 0.0, silence_s=0.1, speech_s=0.4, tail_s=0.1)
    last = len(frames) - 1
    # The front end's marks become the stream's inputs; a "silence" end needs none (a frame follows).
    capture = marked(
        frames,
        {
            last: [
                CapturePaused(at=0.3, speaker_id="bob", audio_time=0.3),
                SpeechEnded(
                    at=0.6,
                    speaker_id="bob",
                    audio_time=0.5,
                    started_audio_time=0.1,
                    duration_s=0.4,
                    reason="capture_stopped",
                ),
                SpeechEnded(at=0.6, speaker_id="bob", audio_time=0.5, started_audio_time=0.1, duration_s=0.4),
            ]
        },
    )
    await asyncio.wait_for(tr.run(items_of(capture)), 5)
    assert [type(e).__name__ for e in events] == ["TranscriptPartial", "TranscriptPartial", "TranscriptFinal"]
    assert stream.pauses == [("bob", 0.3)] and stream.flushes == [("bob", 0.5)]
    tr.remove_speaker("bob")
    assert stream.removed == ["bob"]
    await tr.aclose()
    assert stream.closed


async def test_the_transcriber_takes_its_marks_in_band_and_subscribes_to_nothing() -> None:
    """Speech ends and pauses arrive with the frames, in their order; the bus has no subscriber at
    all, yet every recognized event is published on it and handed to the sink, in order."""
    bus = CountingBus()
    published: list[Event] = []
    real_publish = bus.publish

    def publish(event: Event) -> None:
        published.append(event)
        real_publish(event)

    bus.publish = publish  # type: ignore[method-assign]
    routed: list[RecognitionEvent] = []
    recognizer = NativeRecognizer()
    tr = Transcriber(recognizer, bus=bus, session_id="s-4", sink=routed.append)
    (stream,) = recognizer.streams
    frames = timeline("bob", 0.0, silence_s=0.0, speech_s=0.2, tail_s=0.0)
    ended = SpeechEnded(
        at=0.3,
        speaker_id="bob",
        audio_time=0.2,
        started_audio_time=0.0,
        duration_s=0.2,
        reason="speaker_left",
    )
    paused = CapturePaused(at=0.1, speaker_id="bob", audio_time=0.1)
    capture = marked(frames, {4: [paused], len(frames) - 1: [ended]})
    await asyncio.wait_for(tr.run(items_of(capture)), 5)
    await tr.aclose()
    assert bus.subscribed == []
    n = len(frames)
    assert stream.inputs == ["frame"] * 5 + ["pause"] + ["frame"] * (n - 5) + ["flush"]
    assert [type(e) for e in routed] == [TranscriptPartial] * (n // 10)
    assert published == routed  # observed on the bus, then routed, the same events in the same order


async def test_a_failing_sink_stops_neither_the_transcriber_nor_the_next_event() -> None:
    bus = EventBus()
    seen: list[RecognitionEvent] = []

    def sink(event: RecognitionEvent) -> None:
        seen.append(event)
        if len(seen) == 1:
            raise RuntimeError("consumer bug")

    recognizer = NativeRecognizer()
    tr = Transcriber(recognizer, bus=bus, sink=sink)
    frames = timeline("bob", 0.0, silence_s=0.1, speech_s=0.4, tail_s=0.1)
    await asyncio.wait_for(tr.run(frames_of(frames)), 5)
    await tr.aclose()
    assert [type(e).__name__ for e in seen] == ["TranscriptPartial", "TranscriptPartial", "TranscriptFinal"]
