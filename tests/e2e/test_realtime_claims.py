"""The realtime engine says action statuses exactly, and never lets its model's claims stand.

On the loopback realtime server through the real ``openai`` client (the rig of
``test_realtime_engine.py``): a status line is said by the exact voice (TTS) into the same playback,
never asked of the model, and told to the provider as an assistant item before the next turn; a
sentence of the model's transcript that claims an action status the store does not bear out is cut
before its audio plays, reported, kept out of every record of what was heard, truncated out of the
provider's context, and the true status is said in its place. The statuses are the real
:class:`~openab_voice.actions.claims.ActionClaims` following ``ActionChanged`` on the bus.
"""

from __future__ import annotations

import pytest

from openab_voice.actions.events import ActionChanged
from openab_voice.actions.speech import status_line
from openab_voice.engine.events import BotUtteranceFinished, ProviderTruncated, SpeechClaimCut, SpeechDropped
from openab_voice.engine.state import DialogueState
from openab_voice.jobs import JobStatus
from openab_voice.testing.realtime.rig import RealtimeRig
from openab_voice.testing.rig import SESSION

pytestmark = pytest.mark.timeout(60)

WAITING = status_line(JobStatus.DELIVERED)


def _said(rig: RealtimeRig) -> list[str]:
    return [u.spoken_text for u in rig.events.of(BotUtteranceFinished)]


def _status(rig: RealtimeRig, status: JobStatus, action_id: str = "act-1", session: str = SESSION) -> None:
    rig.bus.publish(
        ActionChanged(
            at=rig.now(),
            session_id=session,
            action_id=action_id,
            status=status.value,
            previous=None,
            actor="test",
        )
    )


async def test_a_status_line_is_said_by_the_exact_voice_and_told_to_the_model() -> None:
    async with RealtimeRig(replies=["It is noon."]) as rig:
        await rig.until_ready()
        rig.manager.announce(WAITING)
        await rig.until(lambda: WAITING in _said(rig))
        assert rig.tts.completed == [WAITING]  # our TTS said it, word for word
        assert rig.client_events("response.create") == []  # the model was never asked to say it
        rig.say("what time is it")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "It is noon."
        items = [e.item for e in rig.client_events("conversation.item.create")]
        said = [(i.role, [c.text for c in i.content]) for i in items if getattr(i, "type", "") == "message"]
        # The provider learns what "it" said before the next turn, in order.
        assert said[-2:] == [("assistant", [WAITING]), ("user", ["Alice says: what time is it"])]
        [create] = rig.client_events("response.create")
        assert create.response is None or create.response.instructions is None
        # Our context holds the exchanges only, as the cascade's does: a status line is no answer.
        assert rig.context_rows() == [("user", "what time is it"), ("assistant", "It is noon.")]


async def test_a_status_line_cut_by_a_false_interruption_is_resumed_by_the_exact_voice() -> None:
    line = "The task is in the text channel, waiting for confirmation. Nobody has confirmed it yet."
    async with RealtimeRig(replies=["Never asked."]) as rig:
        await rig.until_ready()
        rig.manager.announce(line)
        await rig.until(lambda: len(rig.output.played) >= 25)  # into the first sentence
        started = rig.speech_started()
        rig.speech_ended(started=started)  # a cough: no words follow
        await rig.until(
            lambda: any(u.spoken_text.endswith("yet.") for u in rig.events.of(BotUtteranceFinished))
        )
        assert rig.client_events("response.create") == []  # the resume never went to the model
        assert rig.tts.requested == [line, line]  # cut, then said again, exactly


async def test_a_false_claim_is_cut_before_it_plays_reported_and_corrected() -> None:
    reply = "Let me look at that for you. Done, the file is created and the task is finished."
    async with RealtimeRig(replies=[reply, "It is noon."], check_claims=True) as rig:
        await rig.until_ready()
        _status(rig, JobStatus.PROPOSED)
        _status(rig, JobStatus.DELIVERED)
        rig.say("is my task done")
        utt = await rig.until_finished("turn-1")
        [cut] = rig.events.of(SpeechClaimCut)
        assert (cut.claimed, cut.actual, cut.action_id) == ("done", "delivered", "act-1")
        assert cut.text.startswith("Done") and cut.correction == WAITING
        # What came before the claim was heard to its end; the claim never played and is no record.
        assert utt.spoken_text == "Let me look at that for you." and not utt.interrupted
        assert "Done" not in utt.text and "created" not in utt.text
        first = [played for played in rig.output.played if played[0] == "utt-1"]
        assert abs(cut.kept_ms - 20.0 * len(first)) <= 20.0
        # The model stopped generating and its item keeps only what was heard.
        assert len(rig.client_events("response.cancel")) == 1
        [truncated] = rig.events.of(ProviderTruncated)
        assert truncated.audio_end_ms <= cut.kept_ms
        session = rig.session()
        await rig.until(lambda: bool(session.conversation.truncations))
        assert "Done" not in session.conversation.truncations[0].transcript_kept
        # The truth is said in its place, by the exact voice, and only it stands as the record.
        await rig.until(lambda: WAITING in _said(rig))
        assert rig.tts.completed == [WAITING]
        assert rig.context_rows() == [
            ("user", "is my task done"),
            ("assistant", "Let me look at that for you."),
        ]
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        rig.say("what time is it")
        assert (await rig.until_finished("turn-2")).spoken_text == "It is noon."


async def test_a_claim_the_store_bears_out_stands() -> None:
    reply = "Good news. The task is done, the result is in the text channel."
    async with RealtimeRig(replies=[reply], check_claims=True) as rig:
        await rig.until_ready()
        _status(rig, JobStatus.RUNNING)
        _status(rig, JobStatus.SUCCEEDED)
        rig.say("is my task done")
        utt = await rig.until_finished("turn-1")
        assert rig.events.of(SpeechClaimCut) == []
        assert utt.spoken_text == reply
        assert rig.client_events("response.cancel") == []


async def test_another_sessions_action_does_not_bear_out_a_claim() -> None:
    async with RealtimeRig(replies=["I have started the task for you."], check_claims=True) as rig:
        await rig.until_ready()
        _status(rig, JobStatus.RUNNING, session="another-session")
        rig.say("start it")
        await rig.until_finished("turn-1")
        [cut] = rig.events.of(SpeechClaimCut)
        assert (cut.claimed, cut.actual, cut.action_id) == ("running", "no task", None)
        await rig.until(lambda: status_line(None) in _said(rig))


async def test_a_claim_whose_first_words_already_played_is_stopped_at_once() -> None:
    # "The task" is out before "is running" makes the sentence a claim: its audio is stopped now.
    reply = "The task that you asked for is running right now on the agent."
    async with RealtimeRig(replies=[reply], check_claims=True) as rig:
        await rig.until_ready()
        _status(rig, JobStatus.SUCCEEDED)
        rig.say("how is it going")
        utt = await rig.until_finished("turn-1")
        [cut] = rig.events.of(SpeechClaimCut)
        assert (cut.claimed, cut.actual) == ("running", "succeeded")
        assert utt.interrupted and utt.spoken_text == "" and utt.text == ""
        assert rig.output.interrupts  # stopped, not played out
        await rig.until(lambda: status_line(JobStatus.SUCCEEDED) in _said(rig))


async def test_without_an_exact_voice_a_status_line_is_dropped_never_asked_of_the_model() -> None:
    async with RealtimeRig(replies=["It is noon."], exact_voice=False) as rig:
        await rig.until_ready()
        rig.manager.announce(WAITING)
        await rig.until(lambda: bool(rig.events.of(SpeechDropped)))
        [dropped] = rig.events.of(SpeechDropped)
        assert dropped.text == WAITING and "no exact voice" in dropped.reason
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.client_events("response.create") == []
        # Settled like any response, once, with nothing heard (the engine contract).
        await rig.until(lambda: bool(rig.events.of(BotUtteranceFinished)))
        [settled] = rig.events.of(BotUtteranceFinished)
        assert (settled.turn_id, settled.spoken_text) == (dropped.turn_id, "")
