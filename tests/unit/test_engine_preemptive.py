"""Preemptive generation on fakes in virtual time: an answer prepared on the speculative final is
said only when the final confirms exactly that request, and nothing of it leaks before."""

from __future__ import annotations

import json
from collections.abc import Sequence

from openab_voice.bus.events import LatencyMeasured
from openab_voice.engine.events import BotUtteranceFinished, ToolCallHandled, TurnAccepted
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.providers.chat import ChatMessage, ToolCall
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital. It has the Eiffel Tower."


def _latency(rig: Rig, metric: str) -> list[LatencyMeasured]:
    return [e for e in rig.events.of(LatencyMeasured) if e.metric == metric]


async def test_the_answer_prepared_on_the_speculation_is_said_once_the_final_confirms_it() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.speculate(QUESTION, utterance_id="a1")
        await rig.run(0.5)  # the VAD is still waiting out its silence
        # The model ran and the first sentence was synthesized, but nothing was said or decided.
        assert len(rig.chat.requests) == 1 and rig.tts.requested == ["Paris is the capital."]
        assert rig.output.played == [] and rig.manager.state is DialogueState.LISTENING
        assert rig.events.of(TurnAccepted) == [] and rig.events.of(LatencyMeasured) == []
        rig.say(QUESTION, utterance_id="a1")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == ANSWER and not utt.interrupted
        assert len(rig.chat.requests) == 1  # the prepared answer was taken, not asked again
        assert rig.states() == [
            "idle->listening",
            "listening->thinking",
            "thinking->speaking",
            "speaking->listening",
        ]
        assert rig.context_rows() == [("user", QUESTION), ("assistant", ANSWER)]
        # Its figures went out under the confirmed turn; the first audio came at once (the fake TTS
        # takes 80 ms for a first chunk: that was done while the end of speech was confirmed).
        assert {e.turn_id for e in rig.events.of(LatencyMeasured)} == {"turn-1"}
        (eou,) = _latency(rig, "eou_to_first_audio_ms")
        assert eou.value_ms < 80.0
        assert len(_latency(rig, "tts_first_chunk_ms")) == 2


async def test_a_different_final_drops_the_prepared_answer_unheard() -> None:
    replies = [ScriptedReply.text("Wrong answer here. And more of it."), ScriptedReply.text(ANSWER)]
    async with Rig(replies=replies) as rig:
        rig.speculate("What is the capital", utterance_id="a1")
        await rig.run(0.5)
        assert rig.tts.requested == ["Wrong answer here."]
        rig.say(QUESTION, utterance_id="a1")  # the speaker went on: the final says more
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == ANSWER
        assert [r[-1].content for r in rig.chat.requests] == ["What is the capital", QUESTION]
        assert rig.tts.closed_early == ["Wrong answer here."]  # its synthesis was stopped...
        said = {rig.tts.sentence_for(tag) for _, tag, _ in rig.output.played}
        assert said == {"Paris is the capital.", "It has the Eiffel Tower."}  # ...and never played
        assert [e.spoken_text for e in rig.events.of(BotUtteranceFinished)] == [ANSWER]


async def test_a_withdrawn_speculation_drops_the_prepared_answer() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER), ScriptedReply.text("Yes.")]) as rig:
        rig.speculate("What is", utterance_id="a1")
        await rig.run(0.5)
        rig.withdraw(utterance_id="a1")
        await rig.run(0.1)
        assert rig.tts.closed_early == ["Paris is the capital."] and rig.chat.completed == 1
        assert rig.output.played == [] and rig.events.of(BotUtteranceFinished) == []
        rig.say("What is the time?", utterance_id="a1")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "Yes." and len(rig.chat.requests) == 2


async def test_a_prepared_answer_runs_no_tool_before_its_turn_is_confirmed() -> None:
    call = ToolCall(id="c1", name="clock_now", arguments='{"timezone": "Europe/Paris"}')

    def from_tool(messages: Sequence[ChatMessage]) -> ScriptedReply:
        return ScriptedReply.text(f"It is {json.loads(messages[-1].content)['utc'][:4]}.")

    async with Rig(replies=[ScriptedReply.tool(call), from_tool]) as rig:
        rig.speculate("What time is it in Paris?", utterance_id="a1")
        await rig.run(1.0)
        assert rig.events.of(ToolCallHandled) == [] and len(rig.chat.requests) == 1
        rig.say("What time is it in Paris?", utterance_id="a1")
        utt = await rig.until_finished("turn-1")
        assert [(e.name, e.turn_id) for e in rig.events.of(ToolCallHandled)] == [("clock_now", "turn-1")]
        assert utt.spoken_text == "It is 2023."
        assert rig.states()[1:3] == ["listening->thinking", "thinking->tool_running"]


async def test_a_claimed_request_or_the_setting_off_prepares_nothing() -> None:
    async with Rig(replies=[], claimed=lambda text: text.startswith("Start a task")) as rig:
        rig.speculate("Start a task: fix the build", utterance_id="a1")
        await rig.run(0.5)
        assert rig.chat.requests == []
    off = DialogueSettings(bot_user_id="bot", preemptive_generation=False)
    async with Rig(replies=[ScriptedReply.text(ANSWER)], settings=off) as rig:
        rig.speculate(QUESTION, utterance_id="a1")
        await rig.run(0.5)
        assert rig.chat.requests == []
        rig.say(QUESTION, utterance_id="a1")
        assert (await rig.until_finished("turn-1")).spoken_text == ANSWER


async def test_nothing_is_prepared_while_the_bot_speaks_and_a_stale_context_is_not_reused() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    replies = [ScriptedReply.text("Prepared too early."), ScriptedReply.text(ANSWER)]
    async with Rig(replies=replies, names=names) as rig:
        rig.speculate("Jarvis, what is the capital of France?", utterance_id="a1")
        await rig.run(0.3)
        assert len(rig.chat.requests) == 1
        rig.say("I think it is Lyon", speaker="bob")  # context changed under the prepared answer
        await rig.run(0.05)
        rig.say("Jarvis, what is the capital of France?", utterance_id="a1")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == ANSWER and len(rig.chat.requests) == 2
        assert "Lyon" in " ".join(m.content for m in rig.chat.requests[1])
        # While the bot speaks an answer, a speculation prepares nothing.
        rig.chat.add(ScriptedReply.text("Long answer one. Long answer two. Long answer three."))
        rig.say("Jarvis, tell me more", utterance_id="a3")
        await rig.until_playing("Long answer one.")
        rig.speculate("Jarvis, stop", utterance_id="a4")
        await rig.run(0.2)
        assert len(rig.chat.requests) == 3
