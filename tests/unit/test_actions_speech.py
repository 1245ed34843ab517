"""Action speech stays true: an acknowledgment is said only while the action still waits for the
operator, so "done" is never followed, or preceded, by a stale "waiting" (virtual time; the intake
case on the real broker and store)."""

from __future__ import annotations

from pathlib import Path

from openab_voice.actions.events import ActionChanged
from openab_voice.actions.intake import ACK_PROPOSED
from openab_voice.actions.ports import REJECT
from openab_voice.actions.speech import ActionStatusView, while_status
from openab_voice.bus import EventBus
from openab_voice.engine.events import SpeechDropped
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.state import DialogueState
from openab_voice.jobs import JobStatus
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig
from tests.fakes.actions import OPERATOR
from tests.unit.test_actions_intake import hear, session

ANSWER = "Paris is the capital. It has the Eiffel Tower."
DONE = "The task is done. The result is in the text channel."


def changed(bus: EventBus, action_id: str, previous: JobStatus | None, status: JobStatus) -> None:
    bus.publish(
        ActionChanged(
            at=0.0,
            action_id=action_id,
            status=status.value,
            previous=None if previous is None else previous.value,
            actor="test",
        )
    )


def run_to_success(bus: EventBus, action_id: str) -> None:
    """What the broker and executor publish after the operator's click, in order."""
    chain = [JobStatus.DELIVERED, JobStatus.CONFIRMED, JobStatus.RUNNING, JobStatus.SUCCEEDED]
    for previous, status in zip(chain, chain[1:], strict=False):
        changed(bus, action_id, previous, status)


def test_the_view_follows_transitions_and_forgets_the_oldest() -> None:
    bus = EventBus()
    view = ActionStatusView(bus, keep=2)
    cause = while_status(view, "a1", now=JobStatus.DELIVERED)
    assert cause.reason() is None and cause.name == "action a1 awaiting confirmation"
    changed(bus, "a1", JobStatus.DELIVERED, JobStatus.CONFIRMED)
    assert view.status("a1") is JobStatus.CONFIRMED
    assert cause.reason() == "the action is confirmed"
    changed(bus, "a2", None, JobStatus.PROPOSED)
    changed(bus, "a3", None, JobStatus.PROPOSED)
    assert view.status("a1") is None and view.status("a3") is JobStatus.PROPOSED
    view.close()
    changed(bus, "a3", JobStatus.PROPOSED, JobStatus.DELIVERED)
    assert view.status("a3") is JobStatus.PROPOSED  # closed: no longer following


async def answering_with_a1_posted(rig: Rig) -> ActionStatusView:
    """Action ``a1`` posted (a view follows it) and the answer to a question starting to play."""
    view = ActionStatusView(rig.bus)
    changed(rig.bus, "a1", JobStatus.PROPOSED, JobStatus.DELIVERED)
    rig.say("What is the capital of France?")
    await rig.until_playing("Paris is the capital.")
    return view


async def test_a_stale_waiting_line_is_never_said_before_done() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        view = await answering_with_a1_posted(rig)
        # Queued behind the answer, as the intake does once the proposal is posted ...
        rig.manager.announce(ACK_PROPOSED, cause=while_status(view, "a1", now=JobStatus.DELIVERED))
        await rig.run(0.1)
        # ... and before the answer ends, the operator confirms and the task runs to success.
        run_to_success(rig.bus, "a1")
        rig.manager.announce(DONE)
        await rig.until(lambda: DONE in rig.played_sentences())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.played_sentences() == ["Paris is the capital.", "It has the Eiffel Tower.", DONE]
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.text, dropped.reason) == (ACK_PROPOSED, "the action is succeeded")
        view.close()


async def test_a_waiting_line_still_true_is_said_and_done_follows_it() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        view = await answering_with_a1_posted(rig)
        rig.manager.announce(ACK_PROPOSED, cause=while_status(view, "a1", now=JobStatus.DELIVERED))
        await rig.until(lambda: rig.utterance("announce-1") is not None)
        run_to_success(rig.bus, "a1")  # the click comes after the line was said: it was true
        rig.manager.announce(DONE)
        await rig.until(lambda: DONE in rig.played_sentences())
        assert rig.played_sentences()[-2:] == [ACK_PROPOSED, DONE]
        ack = rig.utterance("announce-1")
        assert ack is not None and not ack.interrupted
        assert rig.events.of(SpeechDropped) == []
        view.close()


async def test_a_click_while_the_waiting_line_plays_cuts_it_within_a_frame() -> None:
    async with Rig(replies=[]) as rig:
        view = ActionStatusView(rig.bus)
        changed(rig.bus, "a1", JobStatus.PROPOSED, JobStatus.DELIVERED)
        rig.manager.announce(ACK_PROPOSED, cause=while_status(view, "a1", now=JobStatus.DELIVERED))
        await rig.until(lambda: ACK_PROPOSED in rig.played_sentences())
        await rig.run(0.3)
        clicked = rig.now()
        changed(rig.bus, "a1", JobStatus.DELIVERED, JobStatus.CONFIRMED)
        await rig.until(lambda: rig.utterance("announce-1") is not None)
        rig.manager.announce(DONE)
        await rig.until(lambda: DONE in rig.played_sentences())
        ack = rig.utterance("announce-1")
        assert ack is not None and ack.interrupted and ack.spoken_text == ""
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason, dropped.text) == (
            "playing",
            "the action is confirmed",
            ACK_PROPOSED,
        )
        ack_frames = [at for uid, _, at in rig.output.played if uid == "utt-1"]
        assert ack_frames and max(ack_frames) <= clicked + 0.02 + 1e-9  # sound stopped within a frame
        assert rig.played_sentences() == [ACK_PROPOSED, DONE]
        view.close()


async def test_the_intake_acknowledgment_expires_when_the_operator_decides(
    db_url: str, tmp_path: Path
) -> None:
    async with session(db_url, tmp_path) as (rig, intake):
        assert hear(rig, intake, "Start a task: write a haiku")
        await rig.log.wait_for("say")
        [said] = rig.log.of("say")
        cause = said.data["cause"]
        assert said.data["text"] == ACK_PROPOSED and isinstance(cause, SpeechCause)
        [record] = rig.store.recent()
        assert cause.reason() is None  # delivered: the line is true
        outcome = await rig.broker.click(
            decision=REJECT, action_id=record.id, user_id=OPERATOR, message_id=None
        )
        assert outcome.ok
        assert cause.reason() == "the action is rejected"
        assert cause.name == f"action {record.id} awaiting confirmation"
        await intake.aclose()
