"""Queued speech whose cause expired is never said: checked when it comes up, before synthesis and
before its first frame; what is dropped is published (virtual time, no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from openab_voice.bus import EventBus
from openab_voice.engine.events import BotUtteranceFinished, InterruptionDetected, SpeechDropped
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.response import ResponseDeps, ResponseRequest
from openab_voice.engine.runner import ResponseRunner
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import AudioStarted, DialogueInput, DialogueState, ResponseFinished
from openab_voice.providers.chat import ChatMessage
from openab_voice.report.terminal import describe
from openab_voice.testing.dialogue_fakes import (
    FakeChatModel,
    FakeSpeechOutput,
    FakeTextToSpeech,
    ScriptedReply,
)
from openab_voice.testing.events import EventLog
from openab_voice.testing.rig import Rig
from openab_voice.testing.virtual_time import VirtualClock
from openab_voice.tools import default_tools

ANSWER = "Paris is the capital. It has the Eiffel Tower."
WAITING = "The task is waiting for confirmation."
DONE = "The task is done."


class Switch:
    """A cause that holds until the test says otherwise; counts how often it was asked."""

    def __init__(self, *, holds_for: int | None = None) -> None:
        self.reason: str | None = None
        self.asked = 0
        self._holds_for = holds_for  # expire by itself after this many checks
        self.watchers: list[Callable[[], None]] = []

    def expired(self) -> str | None:
        self.asked += 1
        if self._holds_for is not None and self.asked > self._holds_for:
            return "moved on"
        return self.reason

    def cause(self, name: str = "test cause", *, watched: bool = False) -> SpeechCause:
        return SpeechCause(name=name, expired=self.expired, watch=self.watch if watched else None)

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        self.watchers.append(callback)
        return lambda: self.watchers.remove(callback)

    def flip(self, reason: str | None) -> None:
        """The cause expires and says so (as the action plane does on a transition)."""
        self.reason = reason
        for callback in tuple(self.watchers):
            callback()


async def test_a_line_that_expired_while_queued_is_dropped_and_the_next_one_plays() -> None:
    switch = Switch()
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        rig.manager.announce(WAITING, cause=switch.cause("action a1 awaiting confirmation"))
        await rig.run(0.1)
        switch.reason = "the action is succeeded"  # the state moved on while the answer played
        rig.manager.announce(DONE)
        await rig.until(lambda: DONE in rig.played_sentences())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.played_sentences() == ["Paris is the capital.", "It has the Eiffel Tower.", DONE]
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.text, dropped.cause, dropped.reason, dropped.point) == (
            WAITING,
            "action a1 awaiting confirmation",
            "the action is succeeded",
            "queued",
        )
        assert dropped.session_id == "s1" and dropped.turn_id == "announce-1"
        assert WAITING not in rig.tts.requested  # never even synthesized


async def test_a_line_still_true_when_its_turn_comes_plays() -> None:
    switch = Switch()
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        rig.manager.announce(WAITING, cause=switch.cause())
        await rig.until(lambda: WAITING in rig.played_sentences())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.played_sentences()[-1] == WAITING and rig.events.of(SpeechDropped) == []
        # Asked when it came up, before synthesis and before its first frame.
        assert switch.asked == 3
        switch.reason = "too late to matter"  # once played, it was true when said: nothing to undo
        await rig.run(0.2)
        assert rig.events.of(SpeechDropped) == []


async def test_expired_after_it_started_but_before_synthesis() -> None:
    switch = Switch(holds_for=1)  # true when dequeued, not any more at the next check
    async with Rig(replies=[]) as rig:
        rig.manager.announce(WAITING, cause=switch.cause())
        await rig.until(lambda: bool(rig.events.of(SpeechDropped)))
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.text, dropped.reason) == ("before_synthesis", WAITING, "moved on")
        assert rig.tts.requested == [] and rig.output.played == []
        [finished] = rig.events.of(BotUtteranceFinished)
        assert finished.spoken_text == "" and not finished.interrupted  # nothing heard, nothing committed


async def test_expired_during_synthesis_is_caught_before_the_first_frame() -> None:
    switch = Switch()
    async with Rig(replies=[]) as rig:
        synthesize = rig.tts.synthesize

        def synthesize_while_the_action_moves_on(text: str) -> AsyncIterator[bytes]:
            switch.reason = "the action is running"  # the click lands while the TTS works
            return synthesize(text)

        rig.tts.synthesize = synthesize_while_the_action_moves_on  # type: ignore[method-assign]
        rig.manager.announce(WAITING, cause=switch.cause())
        await rig.until(lambda: bool(rig.events.of(SpeechDropped)))
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason) == ("before_audio", "the action is running")
        assert rig.tts.requested == [WAITING] and rig.tts.closed_early == [WAITING]
        assert rig.output.played == []  # not one frame
        assert "thinking->speaking" not in rig.states()


async def test_a_watched_cause_that_expires_mid_line_cuts_it_and_unwatches() -> None:
    switch = Switch()
    async with Rig(replies=[]) as rig:
        rig.manager.announce(WAITING, cause=switch.cause(watched=True))
        await rig.until(lambda: WAITING in rig.played_sentences())
        assert len(switch.watchers) == 1
        await rig.run(0.2)
        switch.flip("moved on")
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason) == ("playing", "moved on")
        [finished] = rig.events.of(BotUtteranceFinished)
        assert finished.interrupted and finished.spoken_text == ""
        assert switch.watchers == []  # unwatched once the response ended
        assert rig.events.of(InterruptionDetected) == []  # nobody barged in: the line withdrew itself


async def test_a_watched_cause_that_changes_but_still_holds_plays_on() -> None:
    switch = Switch()
    async with Rig(replies=[]) as rig:
        rig.manager.announce(WAITING, cause=switch.cause(watched=True))
        await rig.until(lambda: WAITING in rig.played_sentences())
        switch.flip(None)  # a transition that keeps the line true
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        [finished] = rig.events.of(BotUtteranceFinished)
        assert not finished.interrupted and finished.spoken_text == WAITING
        assert rig.events.of(SpeechDropped) == []


async def test_a_cause_that_cannot_be_checked_is_treated_as_expired() -> None:
    def broken() -> str | None:
        raise LookupError("no such action")

    async with Rig(replies=[]) as rig:
        rig.manager.announce(WAITING, cause=SpeechCause(name="broken", expired=broken))
        await rig.until(lambda: bool(rig.events.of(SpeechDropped)))
        assert rig.events.of(SpeechDropped)[0].reason == "validity check failed: LookupError"
        assert rig.output.played == []


async def test_a_full_queue_drops_its_oldest_line_and_says_so() -> None:
    async with Rig(replies=[ScriptedReply.text(ANSWER)]) as rig:
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        for i in range(9):
            rig.manager.announce(f"Line {i}.")
        await rig.run(0.05)
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.text, dropped.reason) == ("Line 0.", "announcement queue full")


async def test_a_generated_response_stops_at_the_sentence_its_cause_expired() -> None:
    """The runner's check is not only for announcements: a generated reply with a cause stops too,
    the model is closed, and what already went out plays to its end."""
    clock = VirtualClock()
    bus = EventBus()
    events = EventLog(bus)
    chat = FakeChatModel(clock, [ScriptedReply.text("First one. Second one. Third one.", delay_s=0.3)])
    tts = FakeTextToSpeech(clock)
    reports: list[DialogueInput] = []
    switch = Switch(holds_for=2)  # sentence 1: before synthesis and before audio; then expired
    async with FakeSpeechOutput(clock) as output:
        deps = ResponseDeps(
            bus=bus,
            clock=clock,
            chat=chat,
            tts=tts,
            output=output,
            tools=default_tools(clock),
            settings=DialogueSettings(bot_user_id="bot"),
            session_id="s1",
        )
        handle = SpeechHandle(response_id="r1", turn_id="t1", output=output)
        request = ResponseRequest(
            messages=(ChatMessage(role="user", content="count"),), cause=switch.cause("the count")
        )
        runner = ResponseRunner(deps=deps, request=request, handle=handle, report=reports.append)
        task = asyncio.create_task(runner.run())
        assert await clock.run_until(task.done)
    assert tts.requested == ["First one."]
    assert chat.closed_early == 1
    [dropped] = events.of(SpeechDropped)
    assert (dropped.point, dropped.cause, dropped.turn_id) == ("before_synthesis", "the count", "t1")
    assert dropped.text.startswith("Second one.")
    assert handle.heard_sentences() == ("First one.",)
    assert isinstance(reports[0], AudioStarted) and reports[-1] == ResponseFinished(response_id="r1")


def test_the_terminal_reporter_says_what_was_not_said_and_why() -> None:
    dropped = SpeechDropped(
        at=1.0,
        turn_id="announce-1",
        text=WAITING,
        cause="action a1 awaiting confirmation",
        reason="the action is succeeded",
        point="queued",
    )
    assert describe(dropped) == (
        f"bot did not say {WAITING!r}: the action is succeeded (action a1 awaiting confirmation, queued)"
    )


async def test_an_answer_stops_once_the_one_who_asked_left() -> None:
    reply = ScriptedReply.text("One sentence here. Another sentence here. A third one.", delay_s=0.2)
    async with Rig(replies=[reply]) as rig:
        rig.say("Count for me")
        await rig.until_playing("One sentence here.")
        del rig.roster.names["alice"]  # she left while the first sentence played
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.cause, dropped.reason, dropped.point) == (
            "answer to Alice",
            "Alice left the channel",
            "before_synthesis",
        )
        assert rig.played_sentences() == ["One sentence here."]  # what already played plays out
        assert rig.context_rows() == [("user", "Count for me"), ("assistant", "One sentence here.")]
