"""The end-of-turn stage: its rules (the words, the verdict), what a verdict does to an open utterance in
the transcriber's core (on a scripted timeline, every decode and model run answered at once), and
Smart Turn v3.2 itself on shipped clips, a complete and an incomplete one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from openab_voice.audio import scenes
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.engine.turns import only_address
from openab_voice.errors import ConfigError, ProviderUnavailable
from openab_voice.providers.registry import refuse
from openab_voice.providers.turn import TurnConfig, turn_registry
from openab_voice.stt.base import Hypothesis, SttCapabilities
from openab_voice.stt.endpointing import EndOfTurnSettings, EndOfTurnStage, is_complete, text_continues
from openab_voice.stt.events import SpeechResumed, TranscriptFinal, TurnDecided
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.utterances import DecodeJob, TranscriberSettings

RATE = 16_000
FRAME = 320  # 20 ms
SPEAKER = "u1"


@pytest.mark.parametrize(
    ("text", "continues"),
    [
        ("What is the capital of", True),
        ("Can you tell me about the", True),
        ("I want to book a table and", True),
        ("Please remind me to call my", True),
        ("What are you thinking of?", False),  # a stranded preposition ends a question
        ("Where are you from?", False),
        ("Turn the lights on.", False),  # a particle ends a plain sentence
        ("I'd love to.", False),
        ("What time is it in Tokyo?", False),
        ("", False),
    ],
)
def test_a_sentence_does_not_end_on_an_article_a_conjunction_or_an_unasked_preposition(
    text: str, continues: bool
) -> None:
    assert text_continues(text) is continues


def test_the_verdict_needs_the_model_and_the_words() -> None:
    settings = EndOfTurnSettings(threshold=0.5)
    assert is_complete(0.9, "Tell me a joke.", settings)
    assert not is_complete(0.4, "Tell me a joke.", settings)
    assert not is_complete(0.9, "Tell me about the", settings)
    assert is_complete(0.9, "Tell me about the", EndOfTurnSettings(read_words=False))
    assert not is_complete(None, "Tell me a joke.", settings)  # the model failed: no verdict


def test_the_wake_name_alone_is_the_opening_of_a_turn_not_a_turn() -> None:
    # "Jarvis, <pause> what is two plus two?": the session reads its wake name into the settings.
    settings = EndOfTurnSettings(vocative=lambda text: only_address(text, "Jarvis"))
    assert not is_complete(0.9, "Jarvis.", settings)
    assert not is_complete(0.9, "Hey, Jarvus,", settings)  # the name's tolerance
    assert is_complete(0.9, "Thanks, Jarvis.", settings)  # addressed at its end: a turn
    assert is_complete(0.9, "Jarvis.", EndOfTurnSettings())  # no name known
    assert is_complete(0.9, "Jarvis.", EndOfTurnSettings(read_words=False, vocative=settings.vocative))


def test_bad_end_of_turn_settings_name_the_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        EndOfTurnSettings(decide_after_ms=800, max_silence_ms=500)
    assert caught.value.details["setting"] == "turn_max_silence_ms"
    with pytest.raises(ConfigError):
        EndOfTurnSettings(threshold=1.0)


# --- the stage in the transcriber's core ----------------------------------------------------------


class _Stt:
    """Every decode says ``text`` (a doubtful first pass when ``doubtful``)."""

    def __init__(self, text: str, *, doubtful: bool = False) -> None:
        self.text = text
        self.doubtful = doubtful
        self.capabilities = SttCapabilities(
            name="scripted", streaming=True, sample_rate=RATE, languages=("en",), model="fake"
        )

    def transcribe(self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False) -> Hypothesis:
        return Hypothesis(
            text=self.text, confidence=0.9, no_speech_prob=0.05, doubtful=quick and self.doubtful
        )


class _Call:
    """One speaker's frames through a core with the stage; decodes and checks answered at once."""

    def __init__(
        self,
        stt: _Stt,
        probability: Callable[[], float | BaseException],
        *,
        settings: EndOfTurnSettings | None = None,
    ) -> None:
        self.clock = FakeClock(100.0)
        self.events: list[Event] = []
        self.stt = stt
        self.probability = probability
        stage = EndOfTurnStage(settings or EndOfTurnSettings(), rate=RATE, window_s=8.0)
        self.core = RedecodeCore(
            stt.capabilities,
            emit=self.events.append,
            clock=self.clock,
            settings=TranscriberSettings(),
            turns=stage,
        )
        self.t = 100.0

    def _run(self, jobs: list[DecodeJob]) -> None:
        while True:
            for check in self.core.take_turn_checks():
                jobs += self.core.turn_judged(check, self.probability(), 1.0)
            if not jobs:
                return
            job = jobs.pop(0)
            hyp = self.stt.transcribe(job.samples, final=job.final, quick=job.quick)
            jobs += self.core.complete(job, hyp)

    def frames(self, seconds: float, *, user_speech: bool, probability: float) -> None:
        """``seconds`` of 20 ms frames as the front end marks them."""
        for _ in range(round(seconds / 0.02)):
            pcm = np.full(FRAME, 1000 if probability > 0.5 else 0, dtype=np.int16).tobytes()
            audio = AudioFrame(
                pcm=pcm, sample_rate=RATE, channels=1, timestamp=self.t, frame_id=0, speaker_id=SPEAKER
            )
            frame = ProcessedFrame(
                frame=audio,
                speech=user_speech,
                user_speech=user_speech,
                speech_probability=probability,
                bot_speaking=False,
                apm_ok=True,
                degraded=False,
            )
            self.clock.advance_to(self.t)
            self._run(self.core.push(frame))
            self.t += 0.02

    def talk(self, seconds: float) -> None:
        self.frames(seconds, user_speech=True, probability=0.9)

    def pause(self, seconds: float, *, vad_silence_s: float = 0.4) -> None:
        """A pause: quiet frames the VAD still counts as speech for its minimum silence, then not."""
        self.frames(min(seconds, vad_silence_s), user_speech=True, probability=0.05)
        if seconds > vad_silence_s:
            self.frames(seconds - vad_silence_s, user_speech=False, probability=0.05)

    def finals(self) -> list[TranscriptFinal]:
        return [e for e in self.events if isinstance(e, TranscriptFinal)]

    def decided(self) -> list[TurnDecided]:
        return [e for e in self.events if isinstance(e, TurnDecided)]


def test_a_pause_judged_complete_ends_the_turn_before_the_vads_silence() -> None:
    call = _Call(_Stt("Tell me a joke."), lambda: 0.93)
    call.talk(1.0)
    start = call.t
    call.pause(0.3)  # the VAD's 400 ms has not run out
    (final,) = call.finals()
    assert final.text == "Tell me a joke."
    assert final.audio_end == pytest.approx(start)  # the turn ended where the pause began
    assert final.at - start == pytest.approx(0.2, abs=0.021)  # judged at 200 ms of pause
    (decided,) = call.decided()
    assert decided.complete and decided.probability == pytest.approx(0.93)
    call.pause(0.5)  # the rest of the pause, the VAD's end: no second utterance
    call.talk(0.6)  # new words after it: a new utterance
    call.pause(0.25)
    assert [f.utterance_id for f in call.finals()][0] != call.finals()[-1].utterance_id
    assert len(call.finals()) == 2


def test_words_that_go_on_inside_the_vads_silence_start_a_new_utterance_with_an_onset() -> None:
    call = _Call(_Stt("Wait."), lambda: 0.9)
    call.talk(0.5)
    call.pause(0.3)  # judged complete at 200 ms; the VAD still counts the pause as speech
    (first,) = call.finals()
    resume_at = call.t
    call.stt.text = "Stop please."
    call.talk(0.6)  # no new onset from the front end: the words go on in the same speech segment
    (resumed,) = [e for e in call.events if isinstance(e, SpeechResumed)]
    assert resumed.audio_time == pytest.approx(resume_at) and resumed.utterance_id != first.utterance_id
    call.pause(0.3)
    assert [f.text for f in call.finals()] == ["Wait.", "Stop please."]


def test_a_pause_judged_incomplete_holds_the_turn_past_the_vads_silence_until_the_words_go_on() -> None:
    verdicts = iter([0.1, 0.95])
    call = _Call(_Stt("I was thinking of"), lambda: next(verdicts))
    call.talk(1.0)
    call.pause(0.9)  # longer than the VAD's 400 ms
    assert call.finals() == []  # held: the VAD's end of speech did not end it
    assert [d.complete for d in call.decided()] == [False]
    call.stt.text = "I was thinking of getting a new laptop."
    call.talk(0.8)
    call.pause(0.3)
    (final,) = call.finals()  # one turn, both halves
    assert final.text == "I was thinking of getting a new laptop."
    assert [d.complete for d in call.decided()] == [False, True]


def test_words_that_go_on_hold_the_turn_even_when_the_model_says_done() -> None:
    call = _Call(_Stt("Can you tell me about the"), lambda: 0.97)
    call.talk(1.0)
    call.pause(0.9)
    assert call.finals() == []
    (decided,) = call.decided()
    assert not decided.complete and decided.text_continues


def test_a_held_turn_ends_at_the_maximum_silence_where_its_pause_began() -> None:
    call = _Call(_Stt("I was thinking of"), lambda: 0.1, settings=EndOfTurnSettings(max_silence_ms=1000))
    call.talk(1.0)
    start = call.t
    call.pause(0.98)
    assert call.finals() == []
    call.pause(0.1, vad_silence_s=0.0)
    (final,) = call.finals()
    assert final.audio_end == pytest.approx(start)
    assert final.at - start == pytest.approx(1.0, abs=0.021)


def test_a_held_turn_ends_at_its_deadline_when_no_frame_comes() -> None:
    """A Discord client sends nothing in silence: no frame says the pause ran out, the deadline does."""
    call = _Call(_Stt("I was thinking of"), lambda: 0.1)
    call.talk(1.0)
    start = call.t
    call.pause(0.5)  # judged incomplete, then the VAD's end: held; then the packets stop
    assert call.finals() == [] and call.core.hold_deadline() == pytest.approx(start + 1.5)
    assert call.core.expire_holds(start + 1.49) == [] and call.finals() == []
    call._run(call.core.expire_holds(start + 1.5))
    (final,) = call.finals()
    assert final.audio_end == pytest.approx(start) and call.core.hold_deadline() is None


def test_a_failed_model_run_leaves_the_end_to_the_vads_silence() -> None:
    call = _Call(_Stt("Tell me a joke."), lambda: RuntimeError("onnxruntime failed"))
    call.talk(1.0)
    start = call.t
    call.pause(0.38)
    assert call.finals() == []
    call.pause(0.1, vad_silence_s=0.0)  # the VAD's end of speech
    (final,) = call.finals()
    assert final.at - start == pytest.approx(0.4, abs=0.021)
    (decided,) = call.decided()
    assert decided.probability is None and not decided.complete


# --- Smart Turn v3.2 on shipped clips ---------------------------------------------------------------


def _spoken(name: str, pause_s: float) -> npt.NDArray[np.int16]:
    clip = scenes.load_clip(name)
    lo, hi = scenes.active_span(clip)
    speech = clip[int(lo * RATE) : int(hi * RATE)]
    return np.concatenate([scenes.silence(0.5), speech, scenes.silence(pause_s)])


def test_smart_turn_tells_a_finished_sentence_from_one_left_open() -> None:
    detector = turn_registry().create("smart-turn", TurnConfig())
    try:
        done = detector.completion_probability(
            _spoken("far_end", 0.2)
        )  # "... all of the integration tests passed."
        open_ = detector.completion_probability(_spoken("thinking_of", 0.2))  # "I was thinking of"
    finally:
        detector.close()
    assert done >= 0.5 > open_
    assert detector.capabilities.sample_rate == RATE and detector.capabilities.max_seconds == 8.0


def test_smart_turn_features_are_whispers_log_mel_of_the_last_eight_seconds() -> None:
    from openab_voice.providers.turn_smart import SmartTurn

    detector = SmartTurn(TurnConfig())
    long = np.concatenate([scenes.load_clip("bob"), _spoken("alice", 0.2)] * 2)
    features = detector.features(long)
    assert features.shape == (1, 80, 800) and features.dtype == np.float32
    np.testing.assert_array_equal(features, detector.features(long[-8 * RATE :]))  # only the last 8 s count
    short = detector.features(_spoken("thinking_of", 0.2))
    assert np.ptp(short[0, :, :400], axis=1).max() == 0.0  # left-padded: each bin constant over the zeros


def test_a_missing_model_is_refused_with_what_to_install() -> None:
    registry = turn_registry().with_importer(refuse({"faster_whisper"}))
    with pytest.raises(ProviderUnavailable):
        registry.create("smart-turn", TurnConfig())
    with pytest.raises(ProviderUnavailable) as caught:
        turn_registry().create("smart-turn", TurnConfig(model_path="/nonexistent/smart-turn.onnx"))
    assert caught.value.details["setting"] == "turn_model_path"
