"""What the model says about actions, held against the store's statuses (RFC decision 6)."""

from __future__ import annotations

import pytest

from openab_voice.actions.claims import HOLDS, ActionClaims, Claim, claim_in
from openab_voice.actions.events import ActionChanged
from openab_voice.actions.speech import NO_TASK_LINE, STATUS_LINES, status_line
from openab_voice.bus import EventBus
from openab_voice.jobs import JobStatus


@pytest.mark.parametrize(
    ("sentence", "claim"),
    [
        ("The task is done.", Claim.DONE),
        ("Done, the file is created.", Claim.DONE),
        ("I've created the readme for you.", Claim.DONE),
        ("I have fixed the build.", Claim.DONE),
        ("Your request has been completed successfully.", Claim.DONE),
        ("It's finished.", Claim.DONE),
        ("The task is not done yet.", Claim.UNFINISHED),
        ("It isn't finished yet.", Claim.UNFINISHED),
        ("I've started the task.", Claim.RUNNING),
        ("The job is running now.", Claim.RUNNING),
        ("I'm working on it.", Claim.RUNNING),
        ("It is waiting for your confirmation in the text channel.", Claim.AWAITING),
        ("The task needs the operator's approval first.", Claim.AWAITING),
        ("Please confirm it in the text channel.", Claim.AWAITING),
        ("The task has been approved.", Claim.APPROVED),
        ("I have approved it.", Claim.APPROVED),
        ("It hasn't been approved yet.", Claim.AWAITING),
        ("The task failed.", Claim.FAILED),
        ("I couldn't finish the change.", Claim.FAILED),
        ("The action was cancelled.", Claim.CANCELLED),
        ("Your task was rejected by the operator.", Claim.REJECTED),
    ],
)
def test_a_status_claim_is_recognised(sentence: str, claim: Claim) -> None:
    assert claim_in(sentence) is claim


@pytest.mark.parametrize(
    "sentence",
    [
        "The answer to that question is 4.",
        "Could you start a task for that?",
        "It is noon.",
        "I think the weather is fine today.",
        "Tasks like that usually take a few minutes.",
        "Let me look at that for you.",
        "It was not cancelled.",  # a negation that is no status of its own claims nothing
        "",
    ],
)
def test_talk_that_claims_no_status_is_not_a_claim(sentence: str) -> None:
    assert claim_in(sentence) is None


def _changed(bus: EventBus, action_id: str, status: JobStatus, *, session: str | None = "s1") -> None:
    bus.publish(
        ActionChanged(
            at=0.0, session_id=session, action_id=action_id, status=status, previous=None, actor="t"
        )
    )


def test_a_claim_stands_only_when_an_action_of_the_session_is_in_a_status_it_describes() -> None:
    bus = EventBus()
    claims = ActionClaims(bus)
    assert claims.contradiction("It is noon.", session_id="s1") is None
    # With no action in the session, "it" is no task: the tower's history is not a claim.
    assert claims.contradiction("It was finished in eighteen eighty nine.", session_id="s1") is None
    none = claims.contradiction("The task is done.", session_id="s1")
    assert none is not None and (none.actual, none.action_id, none.correction) == (
        "no task",
        None,
        NO_TASK_LINE,
    )
    _changed(bus, "a1", JobStatus.DELIVERED)
    assert claims.contradiction("It is finished.", session_id="s1") is not None  # now "it" may be
    _changed(bus, "b1", JobStatus.SUCCEEDED, session="s2")  # another session's: says nothing of s1's
    found = claims.contradiction("The task is done.", session_id="s1")
    assert found is not None
    assert (found.claimed, found.actual, found.action_id) == ("done", "delivered", "a1")
    assert found.correction == STATUS_LINES[JobStatus.DELIVERED]
    assert found.cause is not None and found.cause.expired() is None
    assert claims.contradiction("It is waiting for your confirmation.", session_id="s1") is None
    _changed(bus, "a1", JobStatus.RUNNING)
    assert found.cause.expired() == "the action is running"  # the correction is not said late
    assert claims.contradiction("The task is running.", session_id="s1") is None
    assert claims.contradiction("It is not done yet.", session_id="s1") is None
    _changed(bus, "a1", JobStatus.SUCCEEDED)
    assert claims.contradiction("The task is done.", session_id="s1") is None
    late = claims.contradiction("It is not done yet.", session_id="s1")
    assert late is not None and late.correction == status_line(JobStatus.SUCCEEDED)
    claims.close()


def test_every_status_has_one_line_and_every_claim_a_status_that_bears_it_out() -> None:
    assert set(STATUS_LINES) == set(JobStatus)
    assert all(HOLDS[claim] for claim in Claim)


def test_the_sessions_remembered_are_bounded() -> None:
    bus = EventBus()
    claims = ActionClaims(bus, keep=2, sessions=2)
    for n in range(3):
        _changed(bus, f"a{n}", JobStatus.SUCCEEDED, session="s1")
    for session in ("s2", "s3"):
        _changed(bus, "x", JobStatus.SUCCEEDED, session=session)
    # s1 was forgotten (two sessions kept): its actions no longer bear out a claim.
    assert claims.contradiction("The task is done.", session_id="s1") is not None
    assert claims.contradiction("The task is done.", session_id="s3") is None
    claims.close()
