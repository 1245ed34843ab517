"""Interruption controller: barge-in decisions and false-interruption recovery bookkeeping."""

from __future__ import annotations

import pytest

from openab_voice.audio.events import SpeechStarted
from openab_voice.clock import FakeClock
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.interruption import Backchannel, InterruptionController, ResumePlan, resume_plan
from openab_voice.engine.settings import DialogueMode
from openab_voice.engine.state import BargeIn, DialogueState
from openab_voice.stt.events import TranscriptFinal, TranscriptPartial
from openab_voice.testing.dialogue_fakes import FakeSpeechOutput, PlayedResult

PLAN = ResumePlan(turn_id="t1", replay=("Cut sentence.", "Rest."))


def speech(speaker: str = "alice") -> SpeechStarted:
    return SpeechStarted(
        at=1.0, speaker_id=speaker, audio_time=0.98, probability=0.9, during_playback=True, confidence=0.7
    )


def partial(text: str, *, stable: bool = True, speaker: str = "alice") -> TranscriptPartial:
    return TranscriptPartial(
        at=1.3,
        speaker_id=speaker,
        utterance_id="u2",
        text=text,
        stable=stable,
        audio_start=0.98,
        audio_end=1.3,
    )


def final(text: str, *, duration_s: float = 0.4, speaker: str = "alice") -> TranscriptFinal:
    return TranscriptFinal(
        at=2.0,
        speaker_id=speaker,
        utterance_id="u2",
        text=text,
        audio_start=0.98,
        audio_end=0.98 + duration_s,
        partials=1,
    )


@pytest.mark.parametrize("state", list(DialogueState))
def test_full_duplex_barges_in_only_while_a_response_runs(state: DialogueState) -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True, backchannels=True)
    decision = c.on_speech_started(state, speech())
    busy = state in {DialogueState.THINKING, DialogueState.SPEAKING, DialogueState.TOOL_RUNNING}
    assert decision == (BargeIn(speaker_id="alice", audio_time=0.98, confidence=0.7) if busy else None)


@pytest.mark.parametrize("state", list(DialogueState))
def test_turn_based_never_barges_in(state: DialogueState) -> None:
    c = InterruptionController(mode=DialogueMode.TURN_BASED, resume=True, backchannels=True)
    assert c.on_speech_started(state, speech()) is None


def armed(*, resume: bool = True) -> tuple[InterruptionController, int]:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=resume, backchannels=True)
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
    c.on_speech_ended("alice", duration_s=0.3)
    assert c.on_window_expired(token) == PLAN


def test_window_expiry_while_still_speaking_waits_for_the_end() -> None:
    c, token = armed()
    assert c.on_window_expired(token) is None
    assert c.pending_speaker == "alice"
    assert c.on_speech_ended("alice", duration_s=0.3) == PLAN


def test_words_make_it_real_even_after_the_window() -> None:
    c, token = armed()
    assert c.on_partial(partial("actually"), wake_name="Jarvis") is None
    c.on_speech_ended("alice", duration_s=0.3)
    assert c.on_window_expired(token) is None
    assert c.on_final("alice", accepted=True) is None


def test_stale_timer_tokens_are_ignored() -> None:
    c, token = armed()
    c.on_speech_ended("alice", duration_s=0.3)
    second = c.arm(speaker_id="alice", plan=PLAN)
    assert second is not None and second != token
    assert c.on_window_expired(token) is None
    assert c.on_window_expired(second) == PLAN


def test_no_plan_or_resume_disabled_arms_nothing() -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True, backchannels=True)
    assert c.arm(speaker_id="alice", plan=None) is None
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=False, backchannels=False)
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


# --- backchannels ------------------------------------------------------------------------------

BACKCHANNEL_PLAN = ResumePlan(turn_id="t1", replay=PLAN.replay, reason="backchannel")


def test_a_stable_backchannel_resumes_once_its_short_speech_ended() -> None:
    c, _ = armed()
    assert c.on_partial(partial("Yeah.", stable=False), wake_name="Jarvis") is None
    assert c.on_partial(partial("Yeah."), wake_name="Jarvis") is None  # still talking: it may go on
    assert c.on_speech_ended("alice", duration_s=0.4) == BACKCHANNEL_PLAN
    assert c.pending_speaker is None
    # Its final, later, is still no turn (the bot is speaking again), and has nothing left to resume.
    assert c.take_backchannel(DialogueState.SPEAKING, final("Yeah."), wake_name="Jarvis") == Backchannel(
        plan=None
    )


def test_the_end_first_then_the_stable_backchannel_resumes() -> None:
    c, _ = armed()
    assert c.on_speech_ended("alice", duration_s=0.5) is None
    assert c.on_partial(partial("Mm-hmm."), wake_name="Jarvis") == BACKCHANNEL_PLAN


def test_an_unstable_backchannel_partial_waits_for_the_final() -> None:
    c, _ = armed()
    c.on_partial(partial("Okay.", stable=False), wake_name="Jarvis")
    assert c.on_speech_ended("alice", duration_s=0.4) is None
    taken = c.take_backchannel(DialogueState.LISTENING, final("Okay."), wake_name="Jarvis")
    assert taken == Backchannel(plan=BACKCHANNEL_PLAN)


@pytest.mark.parametrize("text", ["Wait.", "Stop.", "Yeah, wait.", "Okay, Jarvis.", "What about Rome?"])
def test_a_cut_word_the_name_or_a_sentence_stays_a_real_interruption(text: str) -> None:
    c, token = armed()
    assert c.on_partial(partial(text), wake_name="Jarvis") is None
    assert c.on_speech_ended("alice", duration_s=0.5) is None
    assert c.on_window_expired(token) is None  # words were heard: no resume
    assert c.take_backchannel(DialogueState.LISTENING, final(text), wake_name="Jarvis") is None
    assert c.on_final("alice", accepted=True) is None and c.pending_speaker is None


def test_a_backchannel_then_more_words_is_real() -> None:
    c, _ = armed()
    c.on_partial(partial("Yeah."), wake_name="Jarvis")
    c.on_partial(partial("Yeah, but what about Rome"), wake_name="Jarvis")
    assert c.on_speech_ended("alice", duration_s=1.2) is None
    assert c.on_partial(partial("Yeah."), wake_name="Jarvis") is None  # a later "yeah" does not undo it


def test_a_long_run_of_acknowledgements_is_no_backchannel() -> None:
    c, token = armed()
    c.on_partial(partial("Okay okay."), wake_name="Jarvis")
    assert c.on_speech_ended("alice", duration_s=2.0) is None
    assert c.on_window_expired(token) is None  # the final decides
    long = final("Okay okay.", duration_s=2.0)
    assert c.take_backchannel(DialogueState.LISTENING, long, wake_name="Jarvis") is None


def test_a_backchannel_final_over_the_bot_without_a_barge_in_is_no_turn() -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True, backchannels=True)
    # The echo gate refused its onset: no SpeechStarted, the final comes while the bot speaks.
    taken = c.take_backchannel(DialogueState.SPEAKING, final("Right."), wake_name="Jarvis")
    assert taken == Backchannel(plan=None)
    # The same word while the bot listens is an answer to it ("Shall I go on?" "Yeah."): a turn.
    assert c.take_backchannel(DialogueState.LISTENING, final("Yeah."), wake_name="Jarvis") is None


def test_speech_that_began_over_the_bot_counts_as_over_it_after_the_cut() -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True, backchannels=True)
    assert c.on_speech_started(DialogueState.SPEAKING, speech()) is not None
    assert c.arm(speaker_id="alice", plan=None) is None  # nothing left to say
    assert c.is_backchannel(
        DialogueState.LISTENING, speaker_id="alice", text="Yeah.", duration_s=0.4, wake_name="Jarvis"
    )
    taken = c.take_backchannel(DialogueState.LISTENING, final("Yeah."), wake_name="Jarvis")
    assert taken == Backchannel(plan=None)
    # Its next utterance begins while the bot listens: not over the bot any more.
    c.on_speech_started(DialogueState.LISTENING, speech())
    assert c.take_backchannel(DialogueState.LISTENING, final("Yeah."), wake_name="Jarvis") is None


def test_backchannels_off_keeps_the_old_rules() -> None:
    c = InterruptionController(mode=DialogueMode.FULL_DUPLEX, resume=True, backchannels=False)
    c.on_speech_started(DialogueState.SPEAKING, speech())
    c.arm(speaker_id="alice", plan=PLAN)
    assert c.on_partial(partial("Yeah."), wake_name="Jarvis") is None
    assert c.on_speech_ended("alice", duration_s=0.4) is None
    assert c.take_backchannel(DialogueState.SPEAKING, final("Yeah."), wake_name="Jarvis") is None
    assert c.on_final("alice", accepted=True) is None and c.pending_speaker is None


def test_backchannels_resume_even_when_false_interruptions_do_not() -> None:
    c, token = armed(resume=False)
    c.on_partial(partial("Yeah."), wake_name="Jarvis")
    assert c.on_speech_ended("alice", duration_s=0.4) == BACKCHANNEL_PLAN
    c2, token2 = armed(resume=False)
    c2.on_speech_ended("alice", duration_s=0.3)
    assert c2.on_window_expired(token2) is None and c2.pending_speaker is None  # a cough: not resumed


def test_turn_based_has_no_backchannels() -> None:
    c = InterruptionController(mode=DialogueMode.TURN_BASED, resume=True, backchannels=True)
    assert c.take_backchannel(DialogueState.SPEAKING, final("Yeah."), wake_name="Jarvis") is None


def test_a_backchannel_final_after_its_speaker_spoke_again_still_resumes() -> None:
    c, _ = armed()
    c.on_speech_ended("alice", duration_s=0.4)
    c.on_speech_started(DialogueState.LISTENING, speech())  # talking again before "yeah"'s final
    taken = c.take_backchannel(DialogueState.LISTENING, final("Yeah."), wake_name="Jarvis")
    assert taken == Backchannel(plan=BACKCHANNEL_PLAN)
