"""Interruption controller: barge-in decisions and false-interruption recovery bookkeeping."""

from __future__ import annotations

import pytest

from openab_voice.audio.events import SpeechStarted
from openab_voice.clock import FakeClock
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.interruption import InterruptionController, ResumePlan, resume_plan
from openab_voice.engine.settings import DialogueMode
from openab_voice.engine.state import BargeIn, DialogueState
from openab_voice.testing.dialogue_fakes import FakeSpeechOutput, PlayedResult

PLAN = ResumePlan(turn_id="t1", replay=("Cut sentence.", "Rest."))


def speech(speaker: str = "alice") -> SpeechStarted:
    return SpeechStarted(
        at=1.0, speaker_id=speaker, audio_time=0.98, probability=0.9, during_playback=True, confidence=0.7
    )


@pytest.mark.parametrize("state", list(DialogueState))
def test_full_duplex_barges_in_only_while_a_response_runs(state: DialogueState) -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True)
    decision = c.on_speech_started(state, speech())
    busy = state in {DialogueState.THINKING, DialogueState.SPEAKING, DialogueState.TOOL_RUNNING}
    assert decision == (BargeIn(speaker_id="alice", audio_time=0.98, confidence=0.7) if busy else None)


@pytest.mark.parametrize("state", list(DialogueState))
def test_turn_based_never_barges_in(state: DialogueState) -> None:
    c = InterruptionController(mode=DialogueMode.TURN_BASED, resume=True)
    assert c.on_speech_started(state, speech()) is None


def armed(*, resume: bool = True) -> tuple[InterruptionController, int]:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=resume)
    c.on_speech_started(DialogueState.SPEAKING, speech())
    token = c.arm(speaker_id="alice", plan=PLAN)
    assert token is not None
    return c, token


def test_discarded_interrupting_speech_is_a_false_interruption() -> None:
    c, _ = armed()
    assert c.on_discarded("bob") is None
    assert c.on_discarded("alice") == PLAN
    assert c.pending_speaker is None


def test_ignored_final_of_the_interrupter_resumes() -> None:
    c, _ = armed()
    assert c.on_final("bob", accepted=False) is None  # someone else's chatter
    assert c.on_final("alice", accepted=False) == PLAN


def test_an_accepted_turn_confirms_the_interruption() -> None:
    c, token = armed()
    assert c.on_final("alice", accepted=True) is None
    assert c.on_window_expired(token) is None
    assert c.on_discarded("alice") is None


def test_window_expiry_after_silence_resumes() -> None:
    c, token = armed()
    c.on_speech_ended("alice")
    assert c.on_window_expired(token) == PLAN


def test_window_expiry_while_still_speaking_waits_for_the_end() -> None:
    c, token = armed()
    assert c.on_window_expired(token) is None
    assert c.pending_speaker == "alice"
    assert c.on_speech_ended("alice") == PLAN


def test_words_make_it_real_even_after_the_window() -> None:
    c, token = armed()
    c.on_partial("alice", "actually")
    c.on_speech_ended("alice")
    assert c.on_window_expired(token) is None
    assert c.on_final("alice", accepted=True) is None


def test_stale_timer_tokens_are_ignored() -> None:
    c, token = armed()
    c.on_speech_ended("alice")
    second = c.arm(speaker_id="alice", plan=PLAN)
    assert second is not None and second != token
    assert c.on_window_expired(token) is None
    assert c.on_window_expired(second) == PLAN


def test_no_plan_or_resume_disabled_arms_nothing() -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True)
    assert c.arm(speaker_id="alice", plan=None) is None
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=False)
    assert c.arm(speaker_id="alice", plan=PLAN) is None
    assert c.on_discarded("alice") is None


def make_handle(frames: list[int], played_ms: float, *, done: bool) -> SpeechHandle:
    handle = SpeechHandle(response_id="r1", turn_id="t1", output=FakeSpeechOutput(FakeClock()))
    for i, n in enumerate(frames):
        index = handle.add_sentence(f"S{i + 1}.")
        handle.add_frames(index, n)
        handle.complete_sentence(index)
    if done:
        handle.generation_done()
    handle.mark_played(PlayedResult(utterance_id="u", played_ms=played_ms, interrupted=True))
    return handle


def test_resume_plan_repeats_the_cut_sentence_and_the_rest() -> None:
    plan = resume_plan(make_handle([10, 10, 10], 300.0, done=False))
    assert plan == ResumePlan(turn_id="t1", replay=("S2.", "S3."))


def test_resume_plan_regenerates_when_nothing_was_said_yet() -> None:
    assert resume_plan(make_handle([], 0.0, done=False)) == ResumePlan(turn_id="t1", replay=())


def test_nothing_to_resume_when_all_was_heard() -> None:
    assert resume_plan(make_handle([10], 200.0, done=True)) is None
    assert resume_plan(make_handle([], 0.0, done=True)) is None
