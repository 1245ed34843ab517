"""The transcriber's state logic on a scripted speech-to-text fake: utterances, partials, stability,
finals and discards, scheduling, speakers, failures and closing."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from openab_voice.audio.events import SpeechEnded
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event, LatencyMeasured
from openab_voice.clock import FakeClock
from openab_voice.errors import AudioError, ConfigError
from openab_voice.stt.base import Hypothesis, SttCapabilities
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.redecode_stream import RedecodeRecognizer
from openab_voice.stt.stability import StabilityFilter, normalize_words
from openab_voice.stt.transcriber import Transcriber
from openab_voice.stt.utterances import DecodeJob, TranscriberSettings

RATE = 16_000
FRAME = 320  # 20 ms

Script = Callable[[npt.NDArray[np.int16], bool], Hypothesis]


class ScriptedStt:
    """A SpeechToText whose answers come from a function of (samples, final); records every call."""

    def __init__(self, script: Script, *, streaming: bool = True) -> None:
        self.script = script
        self.calls: list[tuple[int, bool, npt.NDArray[np.int16]]] = []
        self.quick: list[bool] = []  # per call: asked for the first pass only
        self._caps = SttCapabilities(
            name="scripted", streaming=streaming, sample_rate=RATE, languages=("en",), model="fake"
        )

    @property
    def capabilities(self) -> SttCapabilities:
        return self._caps

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        self.calls.append((samples.size, final, samples))
        self.quick.append(quick)
        return self.script(samples, final)

    def close(self) -> None:
        return None


def words_by_length(text: str, *, confidence: float = 0.9, no_speech: float = 0.05) -> Script:
    """More of ``text`` the more audio there is: one word per 200 ms, all of it when final."""
    words = text.split()

    def script(samples: npt.NDArray[np.int16], final: bool) -> Hypothesis:
        count = len(words) if final else min(len(words), samples.size // (RATE // 5))
        return Hypothesis(text=" ".join(words[:count]), confidence=confidence, no_speech_prob=no_speech)

    return script


def frame(
    speaker: str, t: float, *, speech: bool, value: int = 0, bot_speaking: bool = False
) -> ProcessedFrame:
    pcm = np.full(FRAME, value, dtype=np.int16).tobytes()
    audio = AudioFrame(pcm=pcm, sample_rate=RATE, channels=1, timestamp=t, frame_id=0, speaker_id=speaker)
    return ProcessedFrame(
        frame=audio,
        speech=speech,
        user_speech=speech,
        speech_probability=0.9 if speech else 0.1,
        bot_speaking=bot_speaking,
        apm_ok=True,
        degraded=False,
    )


def timeline(
    speaker: str, t0: float, *, silence_s: float, speech_s: float, tail_s: float
) -> list[ProcessedFrame]:
    frames, t = [], t0
    for seconds, speech in ((silence_s, False), (speech_s, True), (tail_s, False)):
        for _ in range(round(seconds / 0.02)):
            frames.append(frame(speaker, t, speech=speech, value=7 if speech else 1))
            t += 0.02
    return frames


class Rig:
    """A transcriber whose decodes run synchronously as soon as the core asks for them."""

    def __init__(self, stt: ScriptedStt, settings: TranscriberSettings | None = None) -> None:
        self.stt = stt
        self.clock = FakeClock(100.0)
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.tr = RedecodeCore(
            stt.capabilities, emit=self.bus.publish, clock=self.clock, settings=settings, session_id="s-1"
        )
        self.held: list[DecodeJob] = []
        self.hold = False

    def run_jobs(self, jobs: list[DecodeJob]) -> None:
        for job in jobs:
            if self.hold:
                self.held.append(job)
                continue
            try:
                result: Hypothesis | BaseException = self.stt.transcribe(
                    job.samples, final=job.final, quick=job.quick
                )
            except Exception as exc:
                result = exc
            self.run_jobs(self.tr.complete(job, result))

    def feed(self, frames: list[ProcessedFrame]) -> None:
        for f in frames:
            self.clock.advance(max(0.0, f.frame.timestamp + 0.02 - self.clock.monotonic()))
            self.run_jobs(self.tr.push(f))

    def of(self, kind: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]


def test_partials_then_stable_partials_then_one_final() -> None:
    rig = Rig(ScriptedStt(words_by_length("Hello there, how are you doing today?")))
    rig.feed(timeline("alice", 100.0, silence_s=0.5, speech_s=2.0, tail_s=0.3))

    transcript = [e for e in rig.events if isinstance(e, TranscriptPartial | TranscriptFinal)]
    assert isinstance(transcript[0], TranscriptPartial) and not transcript[0].stable
    assert isinstance(transcript[-1], TranscriptFinal)
    partials = [e for e in transcript if isinstance(e, TranscriptPartial)]
    stable = [e.text for e in partials if e.stable]
    assert stable, "agreeing hypotheses must produce stable partials"
    first_stable = next(i for i, e in enumerate(partials) if e.stable)
    assert any(not e.stable for e in partials[:first_stable])
    # The stable prefix only grows (never retracted), word by word.
    norm = [normalize_words(t) for t in stable]
    assert all(b[: len(a)] == a and len(b) > len(a) for a, b in zip(norm, norm[1:], strict=False))
    final = transcript[-1]
    assert final.text == "Hello there, how are you doing today?"
    assert final.partials == len(partials)
    assert len(rig.of(TranscriptFinal)) == 1 and not rig.of(TranscriptDiscarded)
    assert {e.utterance_id for e in transcript} == {final.utterance_id}
    assert all(e.session_id == "s-1" for e in transcript)
    (latency,) = rig.of(LatencyMeasured)
    assert isinstance(latency, LatencyMeasured) and latency.metric == "first_stable_partial_ms"
    assert latency.value_ms == pytest.approx((partials[first_stable].at - final.audio_start) * 1000.0)
    assert final.audio_start == pytest.approx(100.5) and final.audio_end == pytest.approx(102.5)


def test_pre_roll_is_included_in_every_decode() -> None:
    stt = ScriptedStt(words_by_length("one two three"))
    rig = Rig(stt, TranscriberSettings(pre_roll_ms=300))
    frames = timeline("alice", 100.0, silence_s=1.0, speech_s=1.0, tail_s=0.2)
    # Mark the silence just before the onset so the pre-roll can be recognised in the decode input.
    for i in range(35, 50):
        frames[i] = frame("alice", frames[i].frame.timestamp, speech=False, value=3)
    rig.feed(frames)

    pre = 300 * RATE // 1000
    for size, _, samples in stt.calls:
        assert np.all(samples[:pre] == 3), "the 300 ms before the onset lead every decode"
        assert np.all(samples[pre:] == 7)
        assert size > pre
    final_sizes = [size for size, final, _ in stt.calls if final]
    assert final_sizes == [pre + RATE]


@pytest.mark.parametrize(
    ("hypothesis", "reason"),
    [
        (Hypothesis(text="", confidence=None, no_speech_prob=0.2), "empty"),
        (Hypothesis(text=" ... ?! ", confidence=0.9, no_speech_prob=0.1), "punctuation_only"),
        (Hypothesis(text="You", confidence=0.25, no_speech_prob=0.98), "no_speech"),
        (Hypothesis(text="I'm going to the ground.", confidence=0.16, no_speech_prob=0.3), "low_confidence"),
    ],
)
def test_unusable_finals_are_discarded(hypothesis: Hypothesis, reason: str) -> None:
    rig = Rig(ScriptedStt(lambda samples, final: hypothesis))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.6, tail_s=0.1))

    assert not rig.of(TranscriptFinal)
    (discarded,) = rig.of(TranscriptDiscarded)
    assert isinstance(discarded, TranscriptDiscarded)
    assert discarded.reason == reason and discarded.speaker_id == "alice"


def test_a_confident_final_is_kept_despite_its_no_speech_score() -> None:
    # Whisper's own rule: the multilingual model scored a loud first Chinese question 0.60 while writing
    # it right at 0.92 confidence; only an unconfident text is taken for silence.
    kept = Hypothesis(text="法國的首都是什麼?", confidence=0.92, no_speech_prob=0.61)
    rig = Rig(ScriptedStt(lambda samples, final: kept))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.6, tail_s=0.1))

    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == kept.text
    assert not rig.of(TranscriptDiscarded)


def test_two_interleaved_speakers_keep_separate_utterances() -> None:
    scripts = {7: "alice speaks here", 5: "bob says this"}
    stt = ScriptedStt(lambda s, final: words_by_length(scripts[int(s[-1])])(s, final))
    rig = Rig(stt, TranscriberSettings(max_concurrent_decodes=2))
    a = timeline("alice", 100.0, silence_s=0.2, speech_s=1.2, tail_s=0.2)
    b = [frame("bob", f.frame.timestamp, speech=f.user_speech, value=5 if f.user_speech else 1) for f in a]
    b = b[10:] + [frame("bob", a[-1].frame.timestamp + 0.02 * i, speech=False) for i in range(1, 11)]
    for fa, fb in zip(a, b, strict=True):
        rig.feed([fa, fb])

    finals = {e.speaker_id: e for e in rig.of(TranscriptFinal) if isinstance(e, TranscriptFinal)}
    assert finals["alice"].text == "alice speaks here" and finals["bob"].text == "bob says this"
    assert finals["alice"].utterance_id != finals["bob"].utterance_id
    for event in rig.of(TranscriptPartial):
        assert isinstance(event, TranscriptPartial)
        assert normalize_words(event.text)[0] == event.speaker_id
    for _, _, samples in stt.calls:
        assert len(set(samples[samples > 1].tolist())) == 1, "a decode never mixes speakers"


def test_one_decode_in_flight_per_speaker_and_in_total() -> None:
    stt = ScriptedStt(words_by_length("a b c d e f"))
    rig = Rig(stt)
    rig.hold = True
    rig.feed(timeline("alice", 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.0))
    rig.feed(timeline("bob", 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.0))
    assert len(rig.held) == 1, "with one decode slot nothing else starts until it completes"
    job = rig.held.pop()
    rig.hold = False
    rig.run_jobs(rig.tr.complete(job, Hypothesis(text="a", confidence=0.9)))
    # Once the slot frees, each speaker's latest audio is decoded once, longest-waiting (bob) first:
    # no backlog of stale partial decodes.
    assert [(size, final) for size, final, _ in stt.calls] == [(int(1.1 * RATE), False)] * 2
    last = rig.of(TranscriptPartial)[-1]
    assert isinstance(last, TranscriptPartial) and last.speaker_id == "alice"


def test_bot_speaking_never_drops_the_users_audio() -> None:
    stt = ScriptedStt(words_by_length("stop right there"))
    rig = Rig(stt)
    frames = timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.1)
    frames = [
        frame(
            "alice",
            f.frame.timestamp,
            speech=f.user_speech,
            value=7 if f.user_speech else 1,
            bot_speaking=True,
        )
        for f in frames
    ]
    rig.feed(frames)
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "stop right there"
    assert [size for size, is_final, _ in stt.calls if is_final] == [int(1.2 * RATE)]  # 0.2 s pre-roll + 1 s


def test_remove_speaker_discards_and_frees_state() -> None:
    stt = ScriptedStt(words_by_length("never finished sentence"))
    rig = Rig(stt)
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.6, tail_s=0.0))
    rig.hold = True
    rig.feed([frame("alice", 100.8 + 0.02 * i, speech=True, value=7) for i in range(15)])
    assert rig.held, "a partial decode is in flight"
    rig.tr.remove_speaker("alice")
    assert rig.tr.speakers == ()
    (discarded,) = rig.of(TranscriptDiscarded)
    assert isinstance(discarded, TranscriptDiscarded) and discarded.reason == "speaker_removed"
    before = len(rig.events)
    job = rig.held.pop()
    rig.hold = False
    rig.run_jobs(rig.tr.complete(job, Hypothesis(text="late result", confidence=0.9)))
    assert len(rig.events) == before, "a decode finishing after removal publishes nothing"
    rig.tr.remove_speaker("alice")  # idempotent


def test_capture_stopped_end_of_speech_finishes_the_utterance() -> None:
    rig = Rig(ScriptedStt(words_by_length("then the packets stopped")))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0))
    assert not rig.of(TranscriptFinal)
    rig.run_jobs(rig.tr.end_speech("alice", 101.2))
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "then the packets stopped"
    # Frames still queued behind the event: the end waits until the audio up to it was pushed.
    rig.feed(timeline("bob", 102.0, silence_s=0.0, speech_s=0.6, tail_s=0.0))
    rig.run_jobs(rig.tr.end_speech("bob", 102.8))
    assert len(rig.of(TranscriptFinal)) == 1
    rig.feed([frame("bob", 102.6 + 0.02 * i, speech=True, value=7) for i in range(10)])
    assert len(rig.of(TranscriptFinal)) == 2


def test_utterances_are_cut_at_the_length_cap() -> None:
    stt = ScriptedStt(words_by_length("w " * 40))
    rig = Rig(stt, TranscriberSettings(max_utterance_s=2.0, pre_roll_ms=0))
    rig.feed(timeline("alice", 100.0, silence_s=0.1, speech_s=5.0, tail_s=0.1))
    finals = rig.of(TranscriptFinal)
    assert len(finals) == 3
    assert all(size <= 2 * RATE for size, final, _ in stt.calls if final)


def test_batch_provider_gets_finals_only() -> None:
    stt = ScriptedStt(words_by_length("batch only"), streaming=False)
    rig = Rig(stt)
    rig.feed(timeline("alice", 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.1))
    assert [final for _, final, _ in stt.calls] == [True]
    assert not rig.of(TranscriptPartial) and len(rig.of(TranscriptFinal)) == 1


def test_stability_filter_never_retracts() -> None:
    f = StabilityFilter(2)
    assert not f.update("Hello there")
    assert f.update("hello, there friend") and f.text == "hello, there"
    assert not f.update("Yellow there friend")  # disagrees inside the stable prefix
    assert not f.update("Yellow there friend again")
    assert f.text == "hello, there"
    assert f.update("hello there friend, again") is False
    assert f.update("Hello there friend again.") and normalize_words(f.text) == [
        "hello",
        "there",
        "friend",
        "again",
    ]


def test_wrong_frames_and_settings_are_rejected() -> None:
    rig = Rig(ScriptedStt(words_by_length("x")))
    stereo = AudioFrame(
        pcm=bytes(4 * FRAME), sample_rate=RATE, channels=2, timestamp=1.0, frame_id=0, speaker_id="a"
    )
    bad = ProcessedFrame(
        frame=stereo,
        speech=True,
        user_speech=True,
        speech_probability=1.0,
        bot_speaking=False,
        apm_ok=True,
        degraded=False,
    )
    with pytest.raises(AudioError):
        rig.tr.push(bad)
    with pytest.raises(ConfigError):
        TranscriberSettings(stable_agreement=1)
    with pytest.raises(ConfigError):
        TranscriberSettings(max_utterance_s=31)


async def frames_async(frames: list[ProcessedFrame]) -> AsyncIterator[ProcessedFrame]:
    for f in frames:
        yield f
        await asyncio.sleep(0)


async def test_provider_failure_is_an_error_event_and_the_transcriber_keeps_going() -> None:
    calls = {"n": 0}

    def flaky(samples: npt.NDArray[np.int16], final: bool) -> Hypothesis:
        calls["n"] += 1
        if final and calls["n"] < 100 and samples.size < 2 * RATE:
            raise RuntimeError("decoder exploded")
        return words_by_length("second try works")(samples, final)

    stt = ScriptedStt(flaky)
    bus, clock = EventBus(), FakeClock()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    tr = Transcriber(RedecodeRecognizer(stt, clock=clock), bus=bus, session_id="s-2")
    frames = timeline("alice", 0.0, silence_s=0.2, speech_s=1.0, tail_s=0.3)
    frames += timeline("alice", 1.5, silence_s=0.2, speech_s=2.2, tail_s=0.3)
    await asyncio.wait_for(tr.run(frames_async(frames)), 10)

    errors = [e for e in events if isinstance(e, ErrorRaised)]
    assert errors and errors[0].code == "STT_DECODE_FAILED" and errors[0].stage == "stt"
    assert errors[0].details["final"] is True and errors[0].session_id == "s-2"
    outcome = [e for e in events if isinstance(e, TranscriptFinal | TranscriptDiscarded)]
    assert [type(e).__name__ for e in outcome] == ["TranscriptDiscarded", "TranscriptFinal"]
    assert isinstance(outcome[0], TranscriptDiscarded) and outcome[0].reason == "stt_error"
    assert isinstance(outcome[1], TranscriptFinal) and outcome[1].text == "second try works"
    await tr.aclose()


async def test_aclose_is_bounded_idempotent_and_discards_open_utterances() -> None:
    release = threading.Event()

    def stuck(samples: npt.NDArray[np.int16], final: bool) -> Hypothesis:
        release.wait(5)
        return Hypothesis(text="too late", confidence=0.9)

    bus, clock = EventBus(), FakeClock()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    recognizer = RedecodeRecognizer(
        ScriptedStt(stuck), clock=clock, settings=TranscriberSettings(close_timeout_s=0.05)
    )
    tr = Transcriber(recognizer, bus=bus)
    stream: asyncio.Queue[ProcessedFrame] = asyncio.Queue()

    async def frames() -> AsyncIterator[ProcessedFrame]:
        while True:
            yield await stream.get()

    tr.start(frames())
    for f in timeline("alice", 0.0, silence_s=0.1, speech_s=0.6, tail_s=0.0):
        stream.put_nowait(f)
    for _ in range(50):
        await asyncio.sleep(0)
    closing = asyncio.ensure_future(tr.aclose())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not closing.done()  # the decode in flight has its grace, on the injected clock
    clock.advance(0.05)
    await asyncio.wait_for(closing, 2)
    await tr.aclose()
    release.set()
    (discarded,) = [e for e in events if isinstance(e, TranscriptDiscarded)]
    assert discarded.reason == "closed"
    assert not [e for e in events if isinstance(e, TranscriptFinal | TranscriptPartial)]


async def test_run_follows_capture_stopped_speech_ends_in_band() -> None:
    bus, clock = EventBus(), FakeClock()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    tr = Transcriber(
        RedecodeRecognizer(ScriptedStt(words_by_length("packets just stopped")), clock=clock), bus=bus
    )
    queue: asyncio.Queue[ProcessedFrame | SpeechEnded | None] = asyncio.Queue()

    async def stream() -> AsyncIterator[ProcessedFrame | SpeechEnded]:
        while (item := await queue.get()) is not None:
            queue.task_done()
            yield item

    done = asyncio.Event()
    bus.subscribe(TranscriptFinal, lambda e: done.set())
    runner = asyncio.create_task(tr.run(stream()))
    for f in timeline("alice", 0.0, silence_s=0.2, speech_s=0.8, tail_s=0.0):
        queue.put_nowait(f)
    await queue.join()
    await asyncio.sleep(0.05)  # real time: the partial decodes (worker threads) land; no final may follow
    assert not done.is_set()
    # Discord sent nothing more; the front end ended speech on its timer, in band after the frames.
    queue.put_nowait(
        SpeechEnded(
            at=1.4,
            speaker_id="alice",
            audio_time=1.0,
            started_audio_time=0.2,
            duration_s=0.8,
            reason="capture_stopped",
        )
    )
    await asyncio.wait_for(done.wait(), 5)
    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    assert len(finals) == 1 and finals[0].text == "packets just stopped"
    queue.put_nowait(None)
    await asyncio.wait_for(runner, 5)
    await tr.aclose()


def together(*speakers: str, speech_s: float) -> list[ProcessedFrame]:
    """``speakers`` talking at once from 100.2 s for ``speech_s`` (no tail), frames in time order."""
    frames = [f for sp in speakers for f in timeline(sp, 100.0, silence_s=0.2, speech_s=speech_s, tail_s=0.0)]
    return sorted(frames, key=lambda f: f.frame.timestamp)


def hangover(speaker: str, t0: float, seconds: float) -> list[ProcessedFrame]:
    """Frames the VAD still counts as speech while it waits out its minimum silence (low score)."""
    out = []
    for i in range(round(seconds / 0.02)):
        f = frame(speaker, t0 + i * 0.02, speech=True, value=1)
        out.append(
            ProcessedFrame(
                frame=f.frame,
                speech=True,
                user_speech=True,
                speech_probability=0.05,
                bot_speaking=False,
                apm_ok=True,
                degraded=False,
            )
        )
    return out


def test_a_speculative_final_during_the_end_silence_is_the_final_when_no_speech_follows() -> None:
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    speech = timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0)
    rig.feed(speech + hangover("alice", 101.2, 0.4))
    speculative = [c for c in stt.calls if c[1]]
    assert len(speculative) == 1 and not rig.of(TranscriptFinal)  # decoded early, not published yet
    # ... but announced, for an answer to be prepared while the VAD waits out its silence.
    (early,) = rig.of(TranscriptSpeculative)
    assert isinstance(early, TranscriptSpeculative) and early.text == "what time is it"
    assert early.at < 101.6
    rig.feed([frame("alice", 101.6, speech=False)])  # the VAD declares the end
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "what time is it"
    assert final.utterance_id == early.utterance_id and not rig.of(SpeculationWithdrawn)
    assert len([c for c in stt.calls if c[1]]) == 1  # no second final decode
    assert final.at == pytest.approx(101.62)  # published at the end, with no decode after it
    assert final.audio_end == pytest.approx(101.6)


def test_the_final_ends_where_the_vad_placed_the_end_of_speech_not_a_minimum_silence_later() -> None:
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt)
    speech = timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0)
    end = dataclasses.replace(frame("alice", 101.6, speech=False), speech_end=101.2)
    rig.feed(speech + hangover("alice", 101.2, 0.4) + [end])
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.audio_end == pytest.approx(101.2)


def test_no_partial_is_decoded_in_a_speculated_pause_so_none_can_hold_its_final_back() -> None:
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0))
    calls = len(stt.calls)
    rig.feed(hangover("alice", 101.2, 0.14))
    # The decoder had nothing else to do: the pause's speculative final was decoded at its first
    # frame, and nothing more (no partial); it is announced once the pause is long enough.
    assert len(stt.calls) == calls + 1 and stt.calls[-1][1] and not rig.of(TranscriptSpeculative)
    rig.feed(hangover("alice", 101.34, 0.06))
    assert rig.of(TranscriptSpeculative) and len(stt.calls) == calls + 1
    calls = len(stt.calls)
    rig.hold = True  # a decode started from here would still be in flight at the end
    rig.feed(hangover("alice", 101.4, 1.0))  # long enough for several partials to fall due
    assert len(stt.calls) == calls and not rig.held
    rig.feed([frame("alice", 102.4, speech=False)])
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "what time is it"


def test_an_early_speculative_decode_takes_the_decoder_only_when_nothing_else_is_due() -> None:
    # One decode slot. Alice pauses while bob's partial is due: bob's partial goes first, and the
    # decode of alice's pause starts only when the decoder is free, still before the pause is long
    # enough to announce (150 ms), so the announcement needs no decode of its own.
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    rig.feed(together("alice", "bob", speech_s=1.0))
    rig.hold = True
    for i in range(15):  # bob goes on talking; whatever decode starts now stays in flight
        rig.feed([frame("bob", 101.2 + i * 0.02, speech=True, value=7)])
    (busy,) = rig.held
    assert busy.speaker_id == "bob" and not busy.final
    rig.feed(hangover("alice", 101.2, 0.02))  # alice's first quiet frame: the slot is taken
    assert rig.held == [busy]
    rig.held.clear()
    rig.feed([frame("bob", 101.5 + i * 0.02, speech=True, value=7) for i in range(15)])  # due again
    (after,) = rig.tr.complete(busy, Hypothesis(text="what time", confidence=0.9, no_speech_prob=0.05))
    assert after.speaker_id == "bob" and not after.final  # the partial due first
    (spec,) = rig.tr.complete(after, Hypothesis(text="what time is", confidence=0.9, no_speech_prob=0.05))
    assert spec.speaker_id == "alice" and spec.speculative  # then the pause, early
    rig.hold = False
    rig.run_jobs([spec])
    assert not rig.of(TranscriptSpeculative)  # decoded, not announced: the pause is 20 ms long
    calls = len(stt.calls)
    rig.feed(hangover("alice", 101.22, 0.14))
    (early,) = rig.of(TranscriptSpeculative)
    assert isinstance(early, TranscriptSpeculative) and early.speaker_id == "alice"
    assert len([c for c in stt.calls[calls:] if c[1]]) == 0  # announced on the early decode


def test_a_decode_due_in_a_quiet_run_is_its_speculative_final_announced_once_the_run_is_long() -> None:
    # Partials due every frame. Before, the first quiet frame started a partial and the speculative
    # final waited behind it; now that decode is the speculative final (the same audio), and the
    # announcement still waits for speculate_after_ms of quiet.
    settings = TranscriberSettings(
        speculate_after_ms=150, partial_interval_ms=20, initial_partial_interval_ms=20
    )
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt, settings)
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0))
    partials = len([c for c in stt.calls if not c[1]])
    rig.hold = True
    rig.feed(hangover("alice", 101.2, 0.02))  # the first quiet frame
    (job,) = rig.held
    assert job.speculative and job.final
    rig.hold = False
    rig.run_jobs([rig.held.pop()])
    assert not rig.of(TranscriptSpeculative)  # decoded, not yet announced
    rig.feed(hangover("alice", 101.22, 0.12))
    assert not rig.of(TranscriptSpeculative)
    assert len([c for c in stt.calls if not c[1]]) == partials  # no partial in the quiet run
    rig.feed(hangover("alice", 101.34, 0.02))  # 160 ms of quiet: announced, with no second decode
    (early,) = rig.of(TranscriptSpeculative)
    assert isinstance(early, TranscriptSpeculative) and early.text == "what time is it"
    assert len([c for c in stt.calls if c[1]]) == 1
    calls = len(stt.calls)
    rig.feed([frame("alice", 101.36, speech=True, value=7)])  # speech again: a partial at once
    assert rig.of(SpeculationWithdrawn) and len(stt.calls) == calls + 1 and not stt.calls[-1][1]


class DoubtingStt(ScriptedStt):
    """Doubts every quick first pass, as faster-whisper's guards doubt a short "Hello?"."""

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        hyp = super().transcribe(samples, final=final, quick=quick)
        return dataclasses.replace(hyp, doubtful=True) if final and quick else hyp


def test_a_pause_between_words_moves_the_stable_prefix_on_through_its_speculative_decode() -> None:
    # "Wait, stop please.": one partial before the comma, then a pause. No partial runs in the pause;
    # its speculative decode is of the same audio, so its words are published as that partial and
    # agree with the first: the stable prefix comes at the pause, not a partial interval after the
    # speech resumes (bench dialogue --load 1: the "stop" utterances' first stable partial came
    # 600-617 ms after their onset, their speculations at 331-431 ms).
    stt = ScriptedStt(words_by_length("wait stop please"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150, stable_agreement=2))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.2, tail_s=0.0))
    (partial,) = rig.of(TranscriptPartial)
    assert isinstance(partial, TranscriptPartial) and not partial.stable and partial.text == "wait stop"
    rig.feed(hangover("alice", 100.4, 0.02))  # the comma's first quiet frame: decoded speculatively
    assert [(c[1], q) for c, q in zip(stt.calls, stt.quick, strict=True)] == [(False, False), (True, True)]
    stable = [e for e in rig.of(TranscriptPartial) if isinstance(e, TranscriptPartial) and e.stable]
    assert [e.text for e in stable] == ["wait stop"]
    (latency,) = rig.of(LatencyMeasured)
    assert isinstance(latency, LatencyMeasured) and latency.metric == "first_stable_partial_ms"
    assert latency.at == pytest.approx(100.42)
    rig.feed([frame("alice", 100.42 + i * 0.02, speech=True, value=7) for i in range(20)])
    rig.feed(hangover("alice", 100.82, 0.2) + [frame("alice", 101.02, speech=False)])
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "wait stop please"
    assert final.partials == len(rig.of(TranscriptPartial))


def test_a_doubtful_quick_pass_is_still_the_partial_it_replaced() -> None:
    # The final's guards doubt the pause's first pass ("Wait," cut short for its length), so it is
    # no speculation; but a partial of that audio is that same first pass, never held to those
    # guards, so the stable prefix does not wait behind the full decode that follows (400-480 ms
    # with a core busy, while the speaker goes on talking).
    stt = DoubtingStt(words_by_length("wait stop please"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150, stable_agreement=2))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.2, tail_s=0.0))
    rig.hold = True
    rig.feed(hangover("alice", 100.4, 0.02))
    (quick,) = rig.held
    assert quick.speculative and quick.quick
    (full,) = rig.tr.complete(quick, stt.transcribe(quick.samples, final=True, quick=True))
    assert full.speculative and not full.quick  # the full decode of the pause, still in flight
    stable = [e.text for e in rig.of(TranscriptPartial) if isinstance(e, TranscriptPartial) and e.stable]
    assert stable == ["wait stop"] and len(rig.of(LatencyMeasured)) == 1
    assert not rig.of(TranscriptSpeculative)  # doubtful: nothing announced


def test_a_doubtful_speculative_decode_is_decoded_in_full_only_when_the_decoder_is_free() -> None:
    # One decode slot, partials due every 20 ms, each decode taking a frame. Alice pauses after
    # "hello" while bob talks on: the quick decode of her pause comes back doubtful and is neither
    # announced nor kept; bob's partials, due each time the slot frees, go first, so no full decode
    # of her pause runs; her final is decoded in full when her speech ends.
    settings = TranscriberSettings(
        speculate_after_ms=150, partial_interval_ms=20, initial_partial_interval_ms=20
    )
    stt = DoubtingStt(words_by_length("hello"))
    rig = Rig(stt, settings)
    rig.feed(together("alice", "bob", speech_s=0.4))
    rig.hold = True
    decoded: list[DecodeJob] = []

    def step(frames: list[ProcessedFrame]) -> None:  # the decode started last finishes now
        rig.feed(frames)
        jobs, rig.held = rig.held, []
        for job in jobs:
            decoded.append(job)
            result = stt.transcribe(job.samples, final=job.final, quick=job.quick)
            rig.held.extend(rig.tr.complete(job, result))

    for i in range(20):  # 400 ms of her pause, bob talking on
        t = 100.6 + i * 0.02
        step([*hangover("alice", t, 0.02), frame("bob", t, speech=True, value=7)])
    assert not rig.of(TranscriptSpeculative)
    step([frame("alice", 101.0, speech=False), frame("bob", 101.0, speech=True, value=7)])  # her end
    step([frame("bob", 101.02, speech=True, value=7)])
    mine = [(j.final, j.speculative, j.quick) for j in decoded if j.speaker_id == "alice"]
    assert mine == [(True, True, True), (True, False, False)]  # quick once; the final in full
    assert len([j for j in decoded if j.speaker_id == "bob"]) >= 18  # bob's partials kept the slot
    (final,) = [e for e in rig.of(TranscriptFinal) if e.speaker_id == "alice"]
    assert isinstance(final, TranscriptFinal) and final.text == "hello"


def test_a_doubtful_pause_alone_is_decoded_in_full_at_once_and_is_the_final() -> None:
    # One talker: the decoder is free, so the full decode follows the doubtful quick one at once,
    # is announced when the pause is long enough, and is the final with no decode at the end.
    stt = DoubtingStt(words_by_length("hello"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=0.4, tail_s=0.0))
    start = len(stt.calls)
    rig.feed(hangover("alice", 100.6, 0.02))  # the first quiet frame
    assert [
        (final, quick) for (_, final, _), quick in zip(stt.calls[start:], stt.quick[start:], strict=True)
    ] == [
        (True, True),  # quick: doubtful
        (True, False),  # then the full decode, the decoder having nothing else to do
    ]
    assert not rig.of(TranscriptSpeculative)
    rig.feed(hangover("alice", 100.62, 0.16))
    (spec,) = rig.of(TranscriptSpeculative)
    assert isinstance(spec, TranscriptSpeculative) and spec.text == "hello"
    calls = len(stt.calls)
    rig.feed([frame("alice", 100.78, speech=False)])
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "hello"
    assert len(stt.calls) == calls  # the full speculative decode was the final


def test_a_capture_pause_decodes_the_utterance_speculatively_at_once() -> None:
    stt = ScriptedStt(words_by_length("what time is it"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    rig.feed(timeline("alice", 100.0, silence_s=0.2, speech_s=1.0, tail_s=0.0))
    rig.run_jobs(rig.tr.pause("alice", 101.2))  # packets held up mid-word: nothing to conclude
    assert not [c for c in stt.calls if c[1]]
    rig.feed(hangover("alice", 101.2, 0.06))  # a client's silence frames, then nothing
    # Decoded at the first quiet frame (the decoder was free), not announced: 60 ms of quiet.
    assert len([c for c in stt.calls if c[1]]) == 1 and not rig.of(TranscriptSpeculative)
    rig.run_jobs(rig.tr.pause("alice", 101.26))
    (early,) = rig.of(TranscriptSpeculative)
    assert isinstance(early, TranscriptSpeculative) and early.text == "what time is it"
    # The capture-stopped end then takes the decode made on the pause: no second final decode.
    rig.run_jobs(rig.tr.end_speech("alice", 101.26))
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "what time is it"
    assert len([c for c in stt.calls if c[1]]) == 1


def test_packets_after_a_capture_pause_withdraw_its_speculation() -> None:
    stt = ScriptedStt(words_by_length("one two three four five six"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    rig.feed(
        timeline("alice", 100.0, silence_s=0.2, speech_s=0.6, tail_s=0.0) + hangover("alice", 100.8, 0.04)
    )
    rig.run_jobs(rig.tr.pause("alice", 100.84))
    assert rig.of(TranscriptSpeculative)
    rig.feed([frame("alice", 100.84 + i * 0.02, speech=True, value=7) for i in range(30)])
    assert rig.of(SpeculationWithdrawn)
    rig.feed(hangover("alice", 101.44, 0.2) + [frame("alice", 101.64, speech=False)])
    (final,) = rig.of(TranscriptFinal)
    assert isinstance(final, TranscriptFinal) and final.text == "one two three four five six"


def test_speech_after_a_speculative_final_makes_it_stale() -> None:
    stt = ScriptedStt(words_by_length("one two three four five six"))
    rig = Rig(stt, TranscriberSettings(speculate_after_ms=150))
    first = timeline("alice", 100.0, silence_s=0.2, speech_s=0.6, tail_s=0.0)
    more = [frame("alice", 101.0 + i * 0.02, speech=True, value=7) for i in range(30)]
    rig.feed(first + hangover("alice", 100.8, 0.2) + more + hangover("alice", 101.6, 0.1))
    rig.feed([frame("alice", 101.7, speech=False)])
    (final,) = rig.of(TranscriptFinal)
    finals = [c for c in stt.calls if c[1]]
    # The pause's speculative decode was made, then thrown away: the final decodes all the audio.
    assert len(finals) == 2 and finals[-1][0] > finals[0][0]
    assert isinstance(final, TranscriptFinal) and final.text == "one two three four five six"
    # What the pause announced was withdrawn as soon as speech came back, before the final.
    kinds = [
        type(e).__name__
        for e in rig.events
        if isinstance(e, TranscriptSpeculative | SpeculationWithdrawn | TranscriptFinal)
    ]
    assert kinds == ["TranscriptSpeculative", "SpeculationWithdrawn", "TranscriptFinal"]
    withdrawn = rig.of(SpeculationWithdrawn)[0]
    assert isinstance(withdrawn, SpeculationWithdrawn) and withdrawn.utterance_id == final.utterance_id


def test_overload_sheds_partials_queues_finals_and_never_splits_an_utterance() -> None:
    """Four talkers, one decode slot held busy: finals queue, due partials are shed and counted."""
    scripts = {7: "alpha one two three", 6: "bravo four five six", 5: "charlie seven eight", 4: "delta nine"}
    stt = ScriptedStt(lambda s, final: words_by_length(scripts[int(s[-1])])(s, final))
    rig = Rig(stt)
    short = {"a": 7, "b": 6, "c": 5}
    lines = {
        name: [
            frame(name, f.frame.timestamp, speech=f.user_speech, value=value if f.user_speech else 1)
            for f in timeline(name, 100.0, silence_s=0.1, speech_s=1.0, tail_s=1.7)
        ]
        for name, value in short.items()
    }
    lines["d"] = [
        frame("d", f.frame.timestamp, speech=f.user_speech, value=4 if f.user_speech else 1)
        for f in timeline("d", 100.0, silence_s=0.1, speech_s=2.5, tail_s=0.2)
    ]
    rig.hold = True  # the first decode takes the slot and does not come back: the CPU fell behind
    for step in zip(*lines.values(), strict=True):
        rig.feed(list(step))
    backlog = [e for e in rig.of(TranscriptionBacklog) if isinstance(e, TranscriptionBacklog)]
    assert backlog and max(e.waiting for e in backlog) == 3 and backlog[-1].oldest_wait_ms > 0
    assert rig.tr.partials_shed > 0
    assert not rig.of(TranscriptFinal)
    assert len(rig.held) == 1
    job = rig.held.pop()
    rig.hold = False
    calls_before = len(stt.calls)
    rig.run_jobs(rig.tr.complete(job, Hypothesis(text="x", confidence=0.9)))
    # The queued finals go first, oldest end of speech first; no stale partial jumps the queue.
    after = stt.calls[calls_before:]
    assert [final for _, final, _ in after[:4]] == [True, True, True, True]
    finals = [e for e in rig.of(TranscriptFinal) if isinstance(e, TranscriptFinal)]
    assert sorted(f.speaker_id for f in finals) == ["a", "b", "c", "d"]  # one final each: nothing split
    assert {f.speaker_id: f.text for f in finals} == {
        "a": scripts[7],
        "b": scripts[6],
        "c": scripts[5],
        "d": scripts[4],
    }
    cleared = [e for e in rig.of(TranscriptionBacklog) if isinstance(e, TranscriptionBacklog)][-1]
    assert cleared.waiting == 0 and cleared.partials_shed == rig.tr.partials_shed


def test_a_single_final_behind_a_partial_is_no_backlog() -> None:
    stt = ScriptedStt(words_by_length("just me talking"))
    rig = Rig(stt)
    rig.feed(timeline("alice", 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.3))
    assert [e for e in rig.of(TranscriptFinal)]
    assert not rig.of(TranscriptionBacklog)
    assert rig.tr.partials_shed == 0


class BatchStt(ScriptedStt):
    """A batching provider: each speaker's text by the frame value; the first decode waits on a gate."""

    def __init__(self, texts: dict[int, str]) -> None:
        super().__init__(lambda s, final: words_by_length(texts[int(s[-1])])(s, final))
        self._caps = dataclasses.replace(self._caps, batch=True)
        self.batches: list[list[bool]] = []
        self.gate = threading.Event()

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        self.batches.append([final])
        assert self.gate.wait(5)
        return super().transcribe(samples, final=final, quick=quick)

    def transcribe_batch(
        self, requests: Sequence[tuple[npt.NDArray[np.int16], bool, bool]]
    ) -> list[Hypothesis | Exception]:
        self.batches.append([final for _, final, _ in requests])
        return [super(BatchStt, self).transcribe(s, final=final, quick=quick) for s, final, quick in requests]


async def test_decodes_due_together_go_out_as_one_batch_and_none_is_lost() -> None:
    texts = {7: "alpha one two", 6: "bravo three four", 5: "charlie five", 4: "delta six seven"}
    stt = BatchStt(texts)
    bus, clock = EventBus(), FakeClock()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    settings = TranscriberSettings(speculate_after_ms=0, max_batch=10)
    tr = Transcriber(RedecodeRecognizer(stt, clock=clock, settings=settings), bus=bus)
    queue: asyncio.Queue[ProcessedFrame | None] = asyncio.Queue()

    async def stream() -> AsyncIterator[ProcessedFrame]:
        while (item := await queue.get()) is not None:
            queue.task_done()
            yield item

    lines = [
        [
            frame(name, f.frame.timestamp, speech=f.user_speech, value=value if f.user_speech else 1)
            for f in timeline(name, 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.2)
        ]
        for name, value in zip("abcd", texts, strict=True)
    ]
    runner = asyncio.create_task(tr.run(stream()))
    for step in zip(*lines, strict=True):  # four people talking at once, ending together
        for f in step:
            queue.put_nowait(f)
    await queue.join()
    assert stt.batches == [[False]]  # one partial went out first, and is held in the decoder
    stt.gate.set()
    queue.put_nowait(None)
    await asyncio.wait_for(runner, 5)
    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    assert sorted(f.text for f in finals) == sorted(texts.values())
    # Everything due meanwhile (every speaker's final) went out together, in one batch.
    assert stt.batches[1] == [True, True, True, True]


def test_a_final_goes_out_in_a_batch_of_finals_never_held_back_by_a_partial() -> None:
    """A batch steps until its longest item is done: a (speculative) final must not ride with partials."""
    caps = SttCapabilities(
        name="batch", streaming=True, sample_rate=RATE, languages=("en",), model="fake", batch=True
    )
    core = RedecodeCore(
        caps, emit=lambda _e: None, clock=FakeClock(100.0), settings=TranscriberSettings(max_batch=8)
    )
    # a talks for 1 s, then its VAD waits out the minimum silence (a quiet run: its final is decoded
    # speculatively) while b and c go on talking, their partials falling due.
    a = timeline("a", 100.0, silence_s=0.1, speech_s=1.0, tail_s=0.0) + hangover("a", 101.1, 0.4)
    a += [frame("a", 101.5 + 0.02 * i, speech=False) for i in range(90)]
    lines = [a] + [timeline(name, 100.0, silence_s=0.1, speech_s=3.0, tail_s=0.2) for name in "bc"]
    batches: list[list[DecodeJob]] = []
    running: list[DecodeJob] = []
    steps_left = 0  # the decoder takes 15 frames (300 ms of audio) per batch

    def start(jobs: list[DecodeJob]) -> None:
        nonlocal running, steps_left
        if jobs:
            batches.append(jobs)
            running, steps_left = jobs, 15
            core.batch_running = True

    for step in zip(*lines, strict=True):
        for f in step:
            start(core.push(f))
        if running:
            steps_left -= 1
            if steps_left == 0:
                done, running = running, []
                core.batch_running = False
                start(core.complete_all([(job, Hypothesis(text="w", confidence=0.9)) for job in done]))
    kinds = [[job.final for job in batch] for batch in batches]
    assert any(job.speculative for batch in batches for job in batch), f"a was not speculated: {kinds}"
    assert all(all(k) for k in kinds if any(k)), f"a final shared its batch with a partial: {kinds}"
    assert any(len(k) > 1 and not any(k) for k in kinds), f"partials were not batched together: {kinds}"
