"""Barge-in, false-interruption recovery and provider failures, end to end on the fakes."""

from __future__ import annotations

import asyncio
from typing import Any

from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.clock import FakeClock
from openab_voice.engine.events import DialogueStateChanged, InterruptionDetected, TurnAccepted
from openab_voice.engine.state import DialogueState
from openab_voice.errors import VoiceError
from openab_voice.providers.chat import ToolCall, ToolSpec
from openab_voice.testing.dialogue_fakes import FakeSpeechOutput, ScriptedReply
from openab_voice.testing.rig import Rig
from openab_voice.tools import ToolContext, ToolRegistry

S1, S2, S3 = (
    "The tower was finished in 1889.",
    "It was built for the World's Fair.",
    "Eiffel's company built it.",
)
ANSWER = f"{S1} {S2} {S3}"
CUT = ["speaking->interrupted", "interrupted->listening"]


def has_run(states: list[str], run: list[str]) -> bool:
    return any(states[i : i + len(run)] == run for i in range(len(states)))


async def test_barge_in_cancels_llm_tts_and_playback_and_commits_only_heard_text() -> None:
    # A slow model and a slower-than-real-time TTS: both are mid-stream when the user speaks.
    reply = ScriptedReply.text(ANSWER + " " + "More words keep coming here. " * 3, delay_s=0.12)
    async with Rig(replies=[reply], tts={"chunk_delay_s": 0.15}) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S2)
        barge_at = rig.speech_started()
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING, limit_s=0.5)
        assert has_run(rig.states(), CUT)
        assert [e.state for e in rig.events.of(InterruptionDetected)] == ["speaking"]
        assert len(rig.output.interrupts) == 1
        assert rig.chat.closed_early == 1  # the model stream was closed
        assert S2 in rig.tts.closed_early  # the cut sentence's synthesis was stopped
        assert set(rig.tts.requested) == set(rig.tts.completed) | set(rig.tts.closed_early)
        await rig.run(1.0)
        assert [t for _, _, t in rig.output.played if t > barge_at + 0.02] == []
        barge = [e.value_ms for e in rig.events.of(LatencyMeasured) if e.metric == "barge_in_ms"]
        assert len(barge) == 1 and barge[0] < 200
        utt = rig.utterance("turn-1")
        assert utt is not None and utt.interrupted and utt.spoken_text == S1 and utt.text.startswith(ANSWER)
        assert rig.context_rows() == [("user", "Tell me about the Eiffel Tower."), ("assistant", S1)]


async def test_repeated_speech_interrupts_once() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S1)
        rig.speech_started()
        rig.speech_started(speaker="alice")
        rig.speech_started(speaker="bob")
        await rig.run(0.3)
        assert len(rig.events.of(InterruptionDetected)) == 1 and len(rig.output.interrupts) == 1
        assert rig.states().count("speaking->interrupted") == 1
        assert rig.events.of(ErrorRaised) == []
        assert rig.manager.state is DialogueState.LISTENING


async def test_the_interrupting_speech_becomes_the_next_turn() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER), ScriptedReply.text("About 330 metres.")]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S2)
        began = rig.speech_started()
        await rig.run(0.5)
        rig.partial("how tall")
        await rig.run(2.5)  # past the false-interruption window: words were heard, so no resume
        rig.say("How tall is it?", began=began)
        await rig.until_finished("turn-2")
        assert not [e for e in rig.events.of(DialogueStateChanged) if e.cause == "false_interruption"]
        assert rig.context_rows() == [
            ("user", "Tell me about the Eiffel Tower."),
            ("assistant", S1),
            ("user", "How tall is it?"),
            ("assistant", "About 330 metres."),
        ]


async def test_false_interruption_repeats_the_cut_sentence() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.02)]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S2)
        rig.speech_started()
        await rig.run(0.3)
        rig.discard()  # a cough: the transcriber found no words
        await rig.until(
            lambda: rig.played_sentences()[-1:] == [S3] and rig.manager.state is DialogueState.LISTENING
        )
        states = rig.states()
        assert has_run(states, CUT + ["listening->thinking", "thinking->speaking", "speaking->listening"])
        resumed = [e for e in rig.events.of(DialogueStateChanged) if e.cause == "false_interruption"]
        assert [(e.previous, e.state, e.turn_id) for e in resumed] == [("listening", "thinking", "turn-1")]
        assert rig.played_sentences() == [S1, S2, S2, S3]  # the cut sentence again, from its start
        assert len(rig.chat.requests) == 1  # replayed, not regenerated
        assert rig.context_rows() == [("user", "Tell me about the Eiffel Tower."), ("assistant", ANSWER)]


async def test_silence_after_the_window_resumes() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER, delay_s=0.02)]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S2)
        rig.speech_started()
        await rig.run(0.2)
        rig.speech_ended()
        await rig.run(1.5)
        assert rig.manager.state is DialogueState.LISTENING  # still inside the 2 s window
        await rig.until(lambda: rig.played_sentences()[-1:] == [S3])
        assert rig.played_sentences() == [S1, S2, S2, S3]


async def test_no_resume_while_the_interrupter_keeps_talking() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER), ScriptedReply.text("Sure.")]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S2)
        began = rig.speech_started()
        await rig.run(4.0)
        assert rig.manager.state is DialogueState.LISTENING and rig.played_sentences() == [S1, S2]
        rig.speech_ended(started=began)
        rig.say("Wait, tell me something else, something long and winding.", began=began)
        await rig.until_finished("turn-2")
        assert [e.text for e in rig.events.of(TurnAccepted)][-1].startswith("Wait")


async def test_false_alarm_while_thinking_regenerates() -> None:
    slow = ScriptedReply(events=ScriptedReply.text("Hello there.").events, delay_s=0.6)
    async with Rig(replies=[slow, ScriptedReply.text("Hello there.")]) as rig:
        rig.say("Hi")
        await rig.run(0.3)
        assert rig.manager.state is DialogueState.THINKING
        rig.speech_started()
        await rig.run(0.1)
        assert "thinking->interrupted" in rig.states() and rig.chat.closed_early == 1
        rig.discard()

        def answered() -> bool:
            utt = rig.utterance("turn-1")
            return utt is not None and not utt.interrupted

        await rig.until(answered)
        assert rig.chat.requests[1] == rig.chat.requests[0]
        assert rig.context_rows() == [("user", "Hi"), ("assistant", "Hello there.")]


async def test_chat_failure_recovers_with_context_unchanged() -> None:
    replies = [ScriptedReply.text("Hello."), ScriptedReply.failing(after=2)]
    async with Rig(replies=replies) as rig:
        rig.say("Hi")
        await rig.until_finished("turn-1")
        before = rig.context_rows()
        rig.say("And now?")
        await rig.until(
            lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is DialogueState.LISTENING
        )
        assert rig.states()[-3:] == ["listening->thinking", "thinking->recovering", "recovering->listening"]
        error = rig.events.of(ErrorRaised)[0]
        assert error.code == "LLM_FAILED" and error.retryable and "connection reset" in error.message
        assert rig.context_rows() == before
        utt = rig.utterance("turn-2")
        assert utt is not None and utt.spoken_text == "" and utt.interrupted


async def test_chat_failure_while_speaking_stops_the_audio() -> None:
    events = ScriptedReply.text(ANSWER).events
    reply = ScriptedReply(events=events, delay_s=0.15, fail_after=len(events) - 3)
    async with Rig(replies=[reply]) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until(
            lambda: rig.manager.state is DialogueState.RECOVERING or rig.events.of(ErrorRaised) != []
        )
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        failed_at = rig.events.of(ErrorRaised)[0].at
        assert "speaking->recovering" in rig.states()
        assert [t for _, _, t in rig.output.played if t > failed_at + 0.02] == []
        assert rig.context_rows() == []


async def test_tts_failure_recovers_without_committing_speech() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)], tts={"fail_on": "World's Fair"}) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until(
            lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is DialogueState.LISTENING
        )
        assert has_run(rig.states(), ["speaking->recovering", "recovering->listening"])
        assert rig.events.of(ErrorRaised)[0].code == "TTS_FAILED"
        assert rig.context_rows() == []
        assert S3 not in rig.played_sentences()


class BrokenOutput(FakeSpeechOutput):
    def begin(self) -> str:
        raise VoiceError("playback is not attached", code="VOICE_PLAYBACK_UNAVAILABLE")


async def test_playback_failure_recovers() -> None:
    async with Rig(replies=[ScriptedReply.text("Hello.")], output=BrokenOutput) as rig:
        rig.say("Hi")
        await rig.until(
            lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is DialogueState.LISTENING
        )
        assert rig.events.of(ErrorRaised)[0].code == "VOICE_PLAYBACK_UNAVAILABLE"
        assert rig.states()[-2:] == ["thinking->recovering", "recovering->listening"]
        assert rig.context_rows() == []


async def test_barge_in_during_a_tool_cancels_it() -> None:
    cancelled: list[bool] = []

    def registry(clock: FakeClock) -> ToolRegistry:
        async def slow_lookup(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
            try:
                await clock.sleep(10.0)  # fake clock: a slow tool; no real time passes
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return {"found": True}

        tools = ToolRegistry(clock, timeout_s=30.0)
        tools.register(ToolSpec(name="slow_lookup", description="takes a while"), slow_lookup)
        return tools

    call = ToolCall(id="c1", name="slow_lookup", arguments="{}")
    async with Rig(replies=[ScriptedReply.tool(call)], tools=registry) as rig:
        rig.say("Look it up")
        await rig.until(lambda: rig.manager.state is DialogueState.TOOL_RUNNING)
        rig.speech_started()
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING, limit_s=0.5)
        assert has_run(rig.states(), ["tool_running->interrupted", "interrupted->listening"])
        await rig.run(0.1)
        assert cancelled == [True]
        assert rig.context_rows() == [("user", "Look it up")]


async def test_another_bot_talking_does_not_interrupt() -> None:
    names = {"alice": "Alice", "bot": "Jarvis", "music": "Groovy"}
    async with Rig(replies=[ScriptedReply.text(ANSWER)], names=names, bots=("bot", "music")) as rig:
        rig.say("Tell me about the Eiffel Tower.")
        await rig.until_playing(S1)
        rig.speech_started(speaker="music")
        utt = await rig.until_finished("turn-1")
        assert rig.events.of(InterruptionDetected) == [] and not utt.interrupted


async def test_a_failing_handler_is_reported_and_the_conversation_goes_on() -> None:
    async with Rig(replies=[ScriptedReply.text("Hello.")]) as rig:
        names = rig.roster.names
        rig.roster.names = None  # type: ignore[assignment]  # display_name() now raises
        rig.say("Hi")
        await rig.run(0.1)
        assert [e.code for e in rig.events.of(ErrorRaised)] == ["ENGINE_INTERNAL_ERROR"]
        rig.roster.names = names
        rig.say("Hi again")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "Hello."
