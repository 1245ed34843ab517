"""The pure dialogue state machine: every (state, input) pair is either in the table or illegal."""

from __future__ import annotations

import pytest

from openab_voice.engine.state import (
    BUSY,
    AudioStarted,
    BargeIn,
    CommitResponse,
    DialogueInput,
    DialogueState,
    DiscardResponse,
    InterruptResponse,
    Recovered,
    ResponseCancelled,
    ResponseFailed,
    ResponseFinished,
    ResumeRequested,
    Snapshot,
    Start,
    StartResponse,
    Stop,
    ToolFinished,
    ToolStarted,
    UserTurn,
    cause_of,
    transition,
)
from openab_voice.errors import IllegalTransition

S = DialogueState
RID = "r1"

INPUTS: dict[str, DialogueInput] = {
    "start": Start(),
    "stop": Stop(),
    "user_turn": UserTurn(turn_id="t2", response_id="r2"),
    "resume": ResumeRequested(turn_id="t1", response_id="r1-resume"),
    "barge_in": BargeIn(speaker_id="alice", audio_time=1.0, confidence=0.9),
    "audio": AudioStarted(response_id=RID),
    "tool_started": ToolStarted(response_id=RID, name="clock_now"),
    "tool_finished": ToolFinished(response_id=RID, name="clock_now", ok=True),
    "finished": ResponseFinished(response_id=RID),
    "failed": ResponseFailed(response_id=RID, code="LLM_FAILED", message="boom"),
    "cancelled": ResponseCancelled(response_id=RID),
    "recovered": Recovered(),
}
RESPONSE_SCOPED = {"audio", "tool_started", "tool_finished", "finished", "failed", "cancelled"}

# (state, input) -> (next state, effect types). Everything else must raise (or be a stale no-op).
TABLE: dict[tuple[DialogueState, str], tuple[DialogueState, tuple[type, ...]]] = {
    (S.IDLE, "start"): (S.LISTENING, ()),
    (S.LISTENING, "user_turn"): (S.THINKING, (StartResponse,)),
    (S.LISTENING, "resume"): (S.THINKING, (StartResponse,)),
    (S.LISTENING, "stop"): (S.IDLE, ()),
    (S.INTERRUPTED, "cancelled"): (S.LISTENING, ()),
    (S.INTERRUPTED, "stop"): (S.IDLE, (InterruptResponse,)),
    (S.RECOVERING, "recovered"): (S.LISTENING, ()),
    (S.RECOVERING, "stop"): (S.IDLE, (InterruptResponse,)),
    (S.THINKING, "audio"): (S.SPEAKING, ()),
    (S.SPEAKING, "audio"): (S.SPEAKING, ()),
    (S.TOOL_RUNNING, "audio"): (S.TOOL_RUNNING, ()),
    (S.THINKING, "tool_started"): (S.TOOL_RUNNING, ()),
    (S.SPEAKING, "tool_started"): (S.TOOL_RUNNING, ()),
    (S.TOOL_RUNNING, "tool_finished"): (S.THINKING, ()),
    (S.THINKING, "finished"): (S.LISTENING, (CommitResponse,)),
    (S.SPEAKING, "finished"): (S.LISTENING, (CommitResponse,)),
}
for busy in BUSY:
    TABLE[(busy, "user_turn")] = (S.THINKING, (InterruptResponse, StartResponse))
    TABLE[(busy, "barge_in")] = (S.INTERRUPTED, (InterruptResponse,))
    TABLE[(busy, "failed")] = (S.RECOVERING, (DiscardResponse,))
    TABLE[(busy, "stop")] = (S.IDLE, (InterruptResponse,))


def snapshot(state: DialogueState) -> Snapshot:
    has_response = state in BUSY or state in {S.INTERRUPTED, S.RECOVERING}
    return Snapshot(
        state=state, turn_id="t1" if has_response else None, response_id=RID if has_response else None
    )


@pytest.mark.parametrize("state", list(DialogueState))
@pytest.mark.parametrize("name", list(INPUTS))
def test_every_state_and_input(state: DialogueState, name: str) -> None:
    snap = snapshot(state)
    expected = TABLE.get((state, name))
    if expected is not None:
        new, effects = transition(snap, INPUTS[name])
        assert new.state is expected[0]
        assert tuple(type(e) for e in effects) == expected[1]
    elif name in RESPONSE_SCOPED and snap.response_id is None:
        # No response is current: a report from one is stale and changes nothing.
        assert transition(snap, INPUTS[name]) == (snap, ())
    else:
        with pytest.raises(IllegalTransition) as info:
            transition(snap, INPUTS[name])
        assert info.value.code == "ENGINE_ILLEGAL_TRANSITION"


def test_the_table_covers_every_state() -> None:
    assert {state for state, _ in TABLE} == set(DialogueState)


def test_stale_reports_change_nothing() -> None:
    snap = Snapshot(state=S.SPEAKING, turn_id="t2", response_id="r2")
    for name in RESPONSE_SCOPED:
        assert transition(snap, INPUTS[name]) == (snap, ())


def test_a_turn_starts_a_response_with_ids() -> None:
    new, effects = transition(snapshot(S.LISTENING), UserTurn(turn_id="t9", response_id="t9"))
    assert new == Snapshot(state=S.THINKING, turn_id="t9", response_id="t9")
    assert effects == (StartResponse(turn_id="t9", response_id="t9"),)


def test_superseding_turn_cancels_the_old_response_first() -> None:
    _, effects = transition(snapshot(S.SPEAKING), UserTurn(turn_id="t2", response_id="r2"))
    assert effects == (
        InterruptResponse(response_id=RID, reason="superseded"),
        StartResponse(turn_id="t2", response_id="r2"),
    )


def test_barge_in_carries_the_speech_for_latency() -> None:
    barge = BargeIn(speaker_id="bob", audio_time=5.0, confidence=0.7)
    new, effects = transition(snapshot(S.SPEAKING), barge)
    assert new.state is S.INTERRUPTED and new.response_id == RID
    assert effects == (InterruptResponse(response_id=RID, reason="barge_in", barge_in=barge),)


def test_interrupt_then_cancel_returns_to_listening() -> None:
    snap, _ = transition(snapshot(S.SPEAKING), INPUTS["barge_in"])
    snap, effects = transition(snap, ResponseCancelled(response_id=RID))
    assert snap == Snapshot(state=S.LISTENING) and effects == ()


def test_failure_goes_through_recovering_to_listening() -> None:
    snap, effects = transition(snapshot(S.THINKING), INPUTS["failed"])
    assert snap.state is S.RECOVERING
    assert effects == (DiscardResponse(response_id=RID, code="LLM_FAILED", message="boom", retryable=True),)
    snap, _ = transition(snap, Recovered())
    assert snap == Snapshot(state=S.LISTENING)


def test_resume_is_marked() -> None:
    _, effects = transition(snapshot(S.LISTENING), INPUTS["resume"])
    assert effects == (StartResponse(turn_id="t1", response_id="r1-resume", resume=True),)


def test_causes() -> None:
    assert cause_of(Stop(reason="closed")) == "closed"
    assert cause_of(INPUTS["resume"]) == "false_interruption"
    assert cause_of(INPUTS["failed"]) == "LLM_FAILED"
    assert cause_of(INPUTS["barge_in"]) == "barge_in"
    assert cause_of(INPUTS["audio"]) == "audio_started"
