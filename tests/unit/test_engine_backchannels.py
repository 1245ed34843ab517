"""Backchannels said over the bot, on the conversation rig (virtual time): a "yeah" does not cut the
answer, a "wait, stop" does."""

from __future__ import annotations

from openab_voice.engine.events import DialogueStateChanged, InterruptionDetected, TurnAccepted, TurnIgnored
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig

S1, S2, S3 = (
    "The tower was finished in 1889.",
    "It was built for the World's Fair.",
    "Eiffel's company built it.",
)
ANSWER = f"{S1} {S2} {S3}"
QUESTION = "Tell me about the Eiffel Tower."


def causes(rig: Rig) -> list[str]:
    return [e.cause for e in rig.events.of(DialogueStateChanged)]


def ignored(rig: Rig) -> list[tuple[str, str]]:
    return [(e.text, e.reason) for e in rig.events.of(TurnIgnored)]


async def test_a_backchannel_resumes_on_its_stable_partial_and_is_never_answered() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.02)]) as rig:
        rig.say(QUESTION)
        await rig.until_playing(S2)
        began = rig.speech_started()  # the bot stops at the onset, as for any barge-in
        await rig.run(0.2)
        assert rig.manager.state is DialogueState.LISTENING
        rig.partial("Yeah.", utterance_id="bc", stable=True)
        await rig.run(0.2)
        rig.speech_ended(started=began)  # 0.4 s of speech: the stable "yeah" decides, before the final
        await rig.until(lambda: rig.manager.state is DialogueState.SPEAKING)
        rig.say("Yeah.", began=began, utterance_id="bc")  # the final, while the answer goes on
        await rig.until(
            lambda: rig.played_sentences()[-1:] == [S3] and rig.manager.state is DialogueState.LISTENING
        )
        assert len(rig.events.of(InterruptionDetected)) == 1
        assert "backchannel" in causes(rig) and "false_interruption" not in causes(rig)
        assert rig.played_sentences() == [S1, S2, S2, S3]  # the cut sentence again, then the rest
        assert ignored(rig) == [("Yeah.", "backchannel")]
        assert [e.text for e in rig.events.of(TurnAccepted)] == [QUESTION]
        assert len(rig.chat.requests) == 1  # "yeah" was never asked of the model
        assert rig.context_rows() == [("user", QUESTION), ("assistant", ANSWER)]


async def test_a_backchannel_without_partials_resumes_on_its_final() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.02)]) as rig:
        rig.say(QUESTION)
        await rig.until_playing(S2)
        began = rig.speech_started()
        await rig.run(0.4)
        rig.speech_ended(started=began)
        await rig.run(0.3)
        assert rig.manager.state is DialogueState.LISTENING  # nothing said yet: the final decides
        rig.say("Mm-hmm.", began=began)
        await rig.until(
            lambda: rig.played_sentences()[-1:] == [S3] and rig.manager.state is DialogueState.LISTENING
        )
        assert rig.played_sentences() == [S1, S2, S2, S3]
        assert ignored(rig) == [("Mm-hmm.", "backchannel")] and len(rig.chat.requests) == 1


async def test_a_backchannel_whose_onset_was_not_heard_does_not_cut_the_answer() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.02)]) as rig:
        rig.say(QUESTION)
        await rig.until_playing(S2)
        rig.say("Okay.", began=rig.now() - 0.4)  # only the final: no SpeechStarted reached the manager
        await rig.until(rig.finished("turn-1"))
        assert rig.events.of(InterruptionDetected) == [] and rig.output.interrupts == []
        assert rig.played_sentences() == [S1, S2, S3]
        assert ignored(rig) == [("Okay.", "backchannel")] and len(rig.chat.requests) == 1


async def test_wait_stop_over_the_bot_stays_a_real_interruption_and_is_answered() -> None:
    replies = [ScriptedReply.text(ANSWER, delay_s=0.02), ScriptedReply.text("Sure, I stopped.")]
    async with Rig(replies=replies) as rig:
        rig.say(QUESTION)
        await rig.until_playing(S2)
        began = rig.speech_started()
        await rig.run(0.2)
        rig.partial("Wait,", utterance_id="st", stable=True)
        await rig.run(0.3)
        rig.speech_ended(started=began)
        await rig.run(3.0)  # past the false-interruption window: a cut word never resumes
        assert rig.played_sentences() == [S1, S2]
        rig.say("Wait, stop please.", began=began, utterance_id="st")
        await rig.until_finished("turn-2")
        assert "backchannel" not in causes(rig) and "false_interruption" not in causes(rig)
        assert [e.text for e in rig.events.of(TurnAccepted)] == [QUESTION, "Wait, stop please."]
        assert ignored(rig) == []


async def test_with_backchannels_off_a_yeah_over_the_bot_is_a_turn() -> None:
    replies = [ScriptedReply.text(ANSWER, delay_s=0.02), ScriptedReply.text("Glad you agree.")]
    settings = DialogueSettings(bot_user_id="bot", ignore_backchannels=False)
    async with Rig(replies=replies, settings=settings) as rig:
        rig.say(QUESTION)
        await rig.until_playing(S2)
        began = rig.speech_started()
        await rig.run(0.2)
        rig.partial("Yeah.", utterance_id="bc", stable=True)
        rig.speech_ended(started=began)
        rig.say("Yeah.", began=began, utterance_id="bc")
        await rig.until_finished("turn-2")
        assert [e.text for e in rig.events.of(TurnAccepted)] == [QUESTION, "Yeah."]
        assert rig.played_sentences()[:2] == [S1, S2] and S3 not in rig.played_sentences()
