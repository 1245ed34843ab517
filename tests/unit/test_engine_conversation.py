"""The conversation manager on fakes in virtual time: turns, context, modes, tools, lifecycle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.engine.cascade import cascade_engine
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    ToolCallHandled,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.settings import DialogueMode, DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.errors import ConfigError
from openab_voice.providers.chat import ChatMessage, ToolCall
from openab_voice.stt.events import SpeechResumed, TranscriptFinal
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import SESSION, Rig

ANSWER = "Paris is the capital. It has the Eiffel Tower."


def answer_from_tool(messages: Sequence[ChatMessage]) -> ScriptedReply:
    result = json.loads(messages[-1].content)
    return ScriptedReply.text(f"The tool said {result.get('error') or result.get('utc', '?')[:4]}.")


async def test_question_and_answer() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("What is the capital of France?")
        utt = await rig.until_finished("turn-1")
        assert rig.states() == [
            "idle->listening",
            "listening->thinking",
            "thinking->speaking",
            "speaking->listening",
        ]
        assert utt.spoken_text == ANSWER and not utt.interrupted
        assert rig.played_sentences() == ["Paris is the capital.", "It has the Eiffel Tower."]
        assert rig.context_rows() == [("user", "What is the capital of France?"), ("assistant", ANSWER)]
        request = rig.chat.requests[0]
        # One speaker: the question as asked, no "Alice:" label for a small model to copy.
        assert request[-1].content == "What is the capital of France?" and request[-1].name == "Alice"
        metrics = {e.metric for e in rig.events.of(LatencyMeasured)}
        assert metrics == {"eou_to_first_audio_ms", "tts_first_chunk_ms"}
        accepted = rig.events.of(TurnAccepted)
        assert [(e.turn_id, e.speaker_id, e.session_id) for e in accepted] == [("turn-1", "alice", "s1")]
    changes = rig.events.of(DialogueStateChanged)
    # Every transition is published, and the chain is unbroken.
    assert all(a.state == b.previous for a, b in zip(changes, changes[1:], strict=False))
    assert changes[-1].state == "idle" and changes[-1].cause == "closed"


async def test_playback_starts_before_the_model_finishes() -> None:
    slow = ScriptedReply.text("First part here. " + " ".join(["word"] * 40) + ".", delay_s=0.2)
    async with Rig(replies=[slow]) as rig:
        rig.say("Tell me a long story")
        await rig.until(lambda: bool(rig.output.played))
        assert rig.manager.state is DialogueState.SPEAKING
        assert rig.chat.completed == 0  # sound while the model still streams
        await rig.until_finished("turn-1")


async def test_two_humans_need_the_wake_name_and_others_are_context() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis", "music": "Groovy"}
    async with Rig(
        replies=[ScriptedReply.text("He asked about lunch.")], names=names, bots=("bot", "music")
    ) as rig:
        rig.say("lunch at noon?", speaker="bob")
        rig.say("now playing a song", speaker="music")
        await rig.run(0.2)
        assert [(e.speaker_id, e.reason) for e in rig.events.of(TurnIgnored)] == [
            ("bob", "not_addressed"),
            ("music", "not_human"),
        ]
        assert rig.manager.state is DialogueState.LISTENING and rig.chat.requests == []
        rig.say("Jarvis, what did Bob ask?")
        await rig.until_finished("turn-1")
        request = rig.chat.requests[0]
        assert ("system", 'Bob said to the others, not to you: "lunch at noon?"') in [
            (m.role, m.content) for m in request
        ]
        assert "now playing" not in " ".join(m.content for m in request)
        # The wake name addressed the bot; the model gets the question without it.
        assert request[-1].content == "What did Bob ask?"


async def test_a_final_that_misheard_the_name_its_stable_partials_agreed_on_is_still_a_turn() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    async with Rig(replies=[ScriptedReply.text("It is in Paris.")], names=names) as rig:
        # Two decodes agreed on "Jarvis, tell me"; the decode of the whole heard "Jervous" (3 edits).
        rig.partial("Jarvis, tell me", utterance_id="u1", stable=True)
        rig.say("Jervous, tell me about the Eiffel Tower.", utterance_id="u1")
        await rig.until_finished("turn-1")
        assert [e.text for e in rig.events.of(TurnAccepted)] == ["Jarvis, tell me about the Eiffel Tower."]
        assert rig.chat.requests[0][-1].content == "Tell me about the Eiffel Tower."
        # Only stable partials of the same utterance count, and only where the final agrees after the name.
        rig.partial("Jarvis, what is", utterance_id="u2", stable=False)
        rig.say("Jervous, what is the time?", utterance_id="u2")
        rig.partial("Jarvis, what is", utterance_id="u3", stable=True)
        rig.say("Jervous, what is the time?", utterance_id="u4")
        rig.partial("Jarvis, tell me", utterance_id="u5", stable=True)
        rig.say("Charlie, do you know?", utterance_id="u5")
        await rig.run(0.2)
        assert [e.reason for e in rig.events.of(TurnIgnored)] == ["not_addressed"] * 3
        assert len(rig.chat.requests) == 1


async def test_a_final_aligned_by_a_partial_that_went_on_from_the_stable_name_is_a_turn() -> None:
    # CI: the stable prefix stopped at "Jarvis"; one decode went on ("Jarvis, tell me"), the next
    # ones heard "Jervous", so the final (the decode of the whole) did too.
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    async with Rig(replies=[ScriptedReply.text("It is in Paris.")], names=names) as rig:
        rig.partial("Jarvis", utterance_id="u1", stable=True)
        rig.partial("Jarvis, tell me", utterance_id="u1", stable=False)
        rig.partial("Jervous, tell me about the earth.", utterance_id="u1", stable=False)
        rig.say("Jervous, tell me about the Eiffel Tower.", utterance_id="u1")
        await rig.until_finished("turn-1")
        assert [e.text for e in rig.events.of(TurnAccepted)] == ["Jarvis, tell me about the Eiffel Tower."]
        assert rig.chat.requests[0][-1].content == "Tell me about the Eiffel Tower."


async def test_turn_based_ignores_capture_while_the_bot_speaks() -> None:
    settings = DialogueSettings(bot_user_id="bot", mode=DialogueMode.TURN_BASED)
    replies = [ScriptedReply.text(ANSWER), ScriptedReply.text("Yes.")]
    async with Rig(replies=replies, settings=settings) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        began = rig.speech_started()
        await rig.run(0.3)
        assert rig.events.of(InterruptionDetected) == [] and rig.manager.state is DialogueState.SPEAKING
        rig.say("Stop talking", began=began)
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == ANSWER and not utt.interrupted
        assert [(e.text, e.reason) for e in rig.events.of(TurnIgnored)] == [("Stop talking", "bot_speaking")]
        # Speech that overlapped the bot's turn is ignored even when its final arrives later.
        rig.say("Late final", began=began)
        await rig.run(0.1)
        assert len(rig.events.of(TurnIgnored)) == 2
        await rig.run(1.0)
        rig.say("Is that right?", began=rig.now() - 0.5)
        await rig.until_finished("turn-2")
        assert rig.context_rows()[-2:] == [("user", "Is that right?"), ("assistant", "Yes.")]


async def test_tool_call_runs_in_tool_running_and_the_answer_continues() -> None:
    call = ToolCall(id="c1", name="clock_now", arguments='{"timezone": "Europe/Paris"}')
    async with Rig(replies=[ScriptedReply.tool(call), answer_from_tool]) as rig:
        rig.say("What time is it in Paris?")
        utt = await rig.until_finished("turn-1")
        assert rig.states()[1:] == [
            "listening->thinking",
            "thinking->tool_running",
            "tool_running->thinking",
            "thinking->speaking",
            "speaking->listening",
        ]
        handled = rig.events.of(ToolCallHandled)
        assert [(e.name, e.ok, e.turn_id) for e in handled] == [("clock_now", True, "turn-1")]
        assert handled[0].result["content"]["timezone"] == "Europe/Paris"
        second = rig.chat.requests[1]
        assert second[-2].role == "assistant" and second[-2].tool_calls == (call,)
        assert second[-1].role == "tool" and second[-1].tool_call_id == "c1"
        assert rig.chat.offered_tools[0] == ("clock_now",)
        assert utt.spoken_text == "The tool said 2023."
        assert [m.role for m in rig.manager.context.messages()] == ["system", "user", "assistant"]


async def test_a_rejected_tool_call_goes_back_to_the_model() -> None:
    call = ToolCall(id="c1", name="rm_rf", arguments="{}")
    async with Rig(replies=[ScriptedReply.tool(call), answer_from_tool]) as rig:
        rig.say("Delete everything")
        utt = await rig.until_finished("turn-1")
        assert [(e.name, e.ok, e.result["error"]) for e in rig.events.of(ToolCallHandled)] == [
            ("rm_rf", False, "TOOL_UNKNOWN")
        ]
        assert utt.spoken_text == "The tool said TOOL_UNKNOWN."
        assert rig.events.of(ErrorRaised) == []


async def test_tool_rounds_are_bounded() -> None:
    settings = DialogueSettings(bot_user_id="bot", max_tool_rounds=1)
    call = ToolCall(id="c", name="clock_now", arguments="{}")
    async with Rig(replies=[ScriptedReply.tool(call), ScriptedReply.tool(call)], settings=settings) as rig:
        rig.say("Loop forever")
        utt = await rig.until_finished("turn-1")
        assert len(rig.chat.requests) == 2 and len(rig.events.of(ToolCallHandled)) == 1
        assert utt.spoken_text == ""


async def test_sentence_budget_stops_the_model() -> None:
    settings = DialogueSettings(bot_user_id="bot", max_response_sentences=2)
    reply = ScriptedReply.text("One. Two. Three. Four. Five.", delay_s=0.1)
    async with Rig(replies=[reply], settings=settings) as rig:
        rig.say("Count")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "One. Two." and rig.played_sentences() == ["One.", "Two."]
        assert rig.chat.closed_early == 1


async def test_a_turn_while_speaking_supersedes_the_response() -> None:
    replies = [ScriptedReply.text(ANSWER), ScriptedReply.text("Berlin.")]
    async with Rig(replies=replies) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("It has the Eiffel Tower.")
        rig.say("And of Germany?")  # its speech start was missed: the final alone supersedes
        await rig.until_finished("turn-2")
        assert "speaking->thinking" in rig.states()
        first = rig.utterance("turn-1")
        assert first is not None and first.interrupted and first.spoken_text == "Paris is the capital."
        assert rig.context_rows() == [
            ("user", "What is the capital of France?"),
            ("assistant", "Paris is the capital."),
            ("user", "And of Germany?"),
            ("assistant", "Berlin."),
        ]


async def test_words_that_go_on_after_a_turn_ended_inside_their_speech_interrupt_the_answer() -> None:
    """The end-of-turn stage ended the turn at a pause the VAD still counted as speech; the speaker
    talks on, so no onset of the front end's comes: the transcriber's SpeechResumed is that onset."""
    async with Rig(replies=[ScriptedReply.text(ANSWER), ScriptedReply.text("Berlin.")]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        now = rig.now()
        rig.hear(
            SpeechResumed(at=now, session_id=SESSION, speaker_id="alice", utterance_id="u9", audio_time=now)
        )
        await rig.clock.settle()
        [detected] = rig.events.of(InterruptionDetected)
        assert detected.speaker_id == "alice" and rig.manager.state is not DialogueState.SPEAKING


async def test_it_hears_by_direct_calls_only_never_from_the_bus() -> None:
    """The bus carries observations: a final or a speech start published there is no input."""
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        now = rig.now()
        rig.bus.publish(
            TranscriptFinal(
                at=now,
                session_id=SESSION,
                speaker_id="alice",
                utterance_id="on-the-bus",
                text="What is the capital of France?",
                audio_start=now - 1.0,
                audio_end=now,
                partials=1,
            )
        )
        await rig.run(0.2)
        assert rig.events.of(TurnAccepted) == [] and rig.events.of(TurnIgnored) == []
        rig.say("What is the capital of France?")
        assert (await rig.until_finished("turn-1")).spoken_text == ANSWER


async def test_aclose_cuts_the_response_and_is_idempotent() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.3)]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        await rig.manager.aclose()
        await rig.manager.aclose()
        assert rig.manager.state is DialogueState.IDLE
        assert rig.chat.closed_early == 1
        utt = rig.utterance("turn-1")
        assert utt is not None and utt.interrupted and utt.spoken_text == ""
        played = len(rig.output.played)
        await rig.run(0.5)
        assert len(rig.output.played) == played
        rig.say("anyone there?")
        await rig.run(0.2)
        assert len(rig.events.of(TurnAccepted)) == 1


async def test_start_once_and_a_wake_name_is_required() -> None:
    async with Rig(replies=[]) as rig:
        with pytest.raises(RuntimeError):
            await rig.manager.start()
        with pytest.raises(ConfigError) as info:
            ConversationManager(
                bus=rig.bus,
                clock=rig.clock,
                chat=rig.chat,
                tts=rig.tts,
                output=rig.output,
                tools=rig.tools,
                roster=rig.roster,
                settings=DialogueSettings(),
            )
        assert info.value.setting == "wake_name"
    assert rig.events.of(BotUtteranceFinished) == []


class GatedOpen:
    """The cascade engine whose open() waits for ``gate``."""

    def __init__(self, inner: DuplexVoiceEngine, gate: asyncio.Event) -> None:
        self.inner, self.gate, self.opening, self.opens = inner, gate, asyncio.Event(), 0

    async def open(self) -> None:
        self.opening.set()
        await self.gate.wait()
        self.opens += 1
        await self.inner.open()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_close_while_the_engine_opens_wins_and_a_closed_manager_never_starts() -> None:
    rig = Rig(replies=[ScriptedReply.text(ANSWER)])
    engines: list[GatedOpen] = []

    def gated(binding: EngineBinding) -> Any:
        build = cascade_engine(chat=rig.chat, tts=rig.tts, output=rig.output, tools=rig.tools)
        engines.append(GatedOpen(build(binding), asyncio.Event()))
        return engines[-1]

    def manager() -> ConversationManager:
        settings = DialogueSettings(bot_user_id="bot")
        return ConversationManager(
            bus=rig.bus, clock=rig.clock, roster=rig.roster, settings=settings, engine=gated
        )

    racing = manager()
    starting = asyncio.create_task(racing.start())
    await engines[0].opening.wait()
    await racing.aclose()
    engines[0].gate.set()
    await starting
    now = rig.now()
    heard = dict(speaker_id="alice", utterance_id="u1", audio_start=now - 1.0, audio_end=now, partials=1)
    racing.hear(TranscriptFinal(at=now, session_id=None, text="Jarvis, what time is it?", **heard))
    await rig.run(0.5)
    assert racing.state is DialogueState.IDLE and engines[0].opens == 1
    assert rig.events.of(DialogueStateChanged) == [] and rig.events.of(TurnAccepted) == []

    closed_first = manager()
    await closed_first.aclose()
    await closed_first.start()
    assert engines[1].opens == 0 and not engines[1].opening.is_set()


async def test_a_claimed_final_is_no_turn_and_cuts_without_resuming() -> None:
    def claimed(text: str) -> bool:
        return text.lower().startswith("start a task")

    long = "One two three. " * 6
    async with Rig(replies=[ScriptedReply.text(long)], claimed=claimed) as rig:
        rig.say("Tell me something long")
        await rig.until_playing("One two three.")
        started = rig.speech_started()
        await rig.run(0.3)
        rig.speech_ended(started=started)
        rig.say("Start a task: write the notes")
        await rig.run(5.0)
        ignored = rig.events.of(TurnIgnored)
        assert [(e.text, e.reason) for e in ignored] == [("Start a task: write the notes", "action_request")]
        assert len(rig.chat.requests) == 1  # the task request never reached the model
        assert [e.turn_id for e in rig.events.of(TurnAccepted)] == ["turn-1"]
        # A valid interruption: the cut answer is not resumed.
        assert not [c for c in rig.events.of(DialogueStateChanged) if c.cause == "false_interruption"]
        assert rig.manager.state is DialogueState.LISTENING


async def test_announcements_wait_for_the_answer_and_never_reach_the_model() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        rig.manager.announce("The task is done.")
        await rig.until(lambda: "The task is done." in rig.played_sentences())
        assert rig.played_sentences() == [
            "Paris is the capital.",
            "It has the Eiffel Tower.",
            "The task is done.",
        ]
        assert len(rig.chat.requests) == 1
        causes = [c.cause for c in rig.events.of(DialogueStateChanged) if c.state == "thinking"]
        assert causes == ["user_turn", "announcement"]
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)


async def test_a_reply_that_starts_with_a_label_is_said_without_it() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    replies = [ScriptedReply.text("Alice: Jarvis: Paris is the capital."), ScriptedReply.text("Jarvis.")]
    async with Rig(replies=replies, names=names) as rig:
        rig.say("Jarvis, what is the capital of France?")
        first = await rig.until_finished("turn-1")
        assert first.spoken_text == "Paris is the capital."
        assert rig.played_sentences() == ["Paris is the capital."]
        rig.say("Jarvis, say your name", speaker="bob")
        second = await rig.until_finished("turn-2")
        # Only the wake name: nothing worth saying, the engine's empty answer (nothing played).
        assert (second.text, second.spoken_text) == ("", "")
        assert rig.played_sentences() == ["Paris is the capital."]
        assert rig.manager.state is DialogueState.LISTENING
