"""The transcript desk: each final to the intakes, then (if none took it) to the conversation, by
direct calls, in order, per session; a consumer that raises stops nothing else."""

from __future__ import annotations

import logging
from typing import cast

import pytest

import openab_voice.actions.intake as task_intake
from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.intake import TaskPhraseIntake
from openab_voice.actions.requests import ActionRequest, Outcome
from openab_voice.actions.tools import SessionFacts
from openab_voice.engine.desk import Heard, TranscriptDesk
from openab_voice.engine.events import TurnAccepted, TurnIgnored
from openab_voice.engine.expiry import SpeechCause
from openab_voice.stt.events import TranscriptFinal, TranscriptPartial, TranscriptSpeculative
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import SESSION, Rig


def final(
    text: str, utterance_id: str, *, session_id: str = SESSION, speaker: str = "1001"
) -> TranscriptFinal:
    return TranscriptFinal(
        at=0.0,
        session_id=session_id,
        speaker_id=speaker,
        utterance_id=utterance_id,
        text=text,
        audio_start=0.0,
        audio_end=1.0,
        partials=1,
    )


def partial(text: str, utterance_id: str, *, session_id: str = SESSION) -> TranscriptPartial:
    return TranscriptPartial(
        at=0.0,
        session_id=session_id,
        speaker_id="1001",
        utterance_id=utterance_id,
        text=text,
        stable=False,
        audio_start=0.0,
        audio_end=0.5,
    )


class RecordingBroker:
    """What the task intake calls on a broker: ``propose``, recorded and refused."""

    def __init__(self) -> None:
        self.requests: list[ActionRequest] = []

    async def propose(self, request: ActionRequest) -> Outcome:
        self.requests.append(request)
        return Outcome(ok=False, message="recorded", code="TEST_RECORDED")


class LogIntake:
    """Takes the finals whose text starts with ``prefix``; writes every offer to ``log``."""

    def __init__(self, name: str, log: list[tuple[str, str]], prefix: str = "take") -> None:
        self.name, self.log, self.prefix = name, log, prefix

    def claims(self, text: str) -> bool:
        return text.startswith(self.prefix)

    def offer(self, final: TranscriptFinal) -> bool:
        self.log.append((self.name, final.utterance_id))
        return self.claims(final.text)


class LogListener:
    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name, self.log = name, log

    def hear(self, event: Heard) -> None:
        self.log.append((self.name, event.utterance_id))

    def hear_claimed(self, final: TranscriptFinal) -> None:
        self.log.append((f"{self.name}:claimed", final.utterance_id))


async def test_a_claimed_final_never_becomes_a_turn_and_the_phrase_is_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    real = task_intake.task_goal

    def counting(text: str, *, wake_name: str | None = None) -> str | None:
        parsed.append(text)
        return real(text, wake_name=wake_name)

    monkeypatch.setattr(task_intake, "task_goal", counting)
    broker = RecordingBroker()
    async with Rig(replies=[ScriptedReply.text("Sure.")], names={"1001": "Olivia", "bot": "Jarvis"}) as rig:

        async def say(text: str, *, cause: SpeechCause | None = None) -> None:
            rig.manager.announce(text, cause=cause)

        intake = TaskPhraseIntake(
            broker=cast(ActionBroker, broker),
            bus=rig.bus,
            facts=SessionFacts(
                guild_id=1, voice_channel_id=2, text_channel_id=3, generation=1, session_id=SESSION
            ),
            wake_name=lambda: "Jarvis",
            say=say,
        )
        rig.desk = TranscriptDesk([intake], rig.manager)
        rig.say("Jarvis, start a task: write the release notes", speaker="1001")
        await rig.run(0.5)
        await intake.aclose()
        assert parsed == ["Jarvis, start a task: write the release notes"]  # once, by the intake
        assert [r.goal for r in broker.requests] == ["write the release notes"]
        assert [(e.text, e.reason) for e in rig.events.of(TurnIgnored)] == [
            ("Jarvis, start a task: write the release notes", "action_request")
        ]
        assert rig.events.of(TurnAccepted) == [] and rig.chat.requests == []
        # A final nobody takes is still a turn (and is parsed once too).
        rig.say("Jarvis, what time is it?", speaker="1001")
        await rig.until(lambda: len(rig.events.of(TurnAccepted)) == 1)
        assert parsed[1:] == ["Jarvis, what time is it?"]


def test_intakes_before_the_conversation_in_order_per_session() -> None:
    log: list[tuple[str, str]] = []
    desks = {
        name: TranscriptDesk(
            [LogIntake(f"{name}-task", log), LogIntake(f"{name}-memory", log, prefix="remember")],
            LogListener(f"{name}-talk", log),
        )
        for name in ("A", "B")
    }
    desks["A"].route(final("hello", "a1"))
    desks["B"].route(final("take this", "b1"))
    desks["A"].route(partial("rem", "a2"))
    desks["A"].route(final("remember the milk", "a2"))
    desks["B"].route(final("hi", "b2", session_id="A"))  # the desk, not the stamp, says whose it is
    assert log == [
        ("A-task", "a1"),
        ("A-memory", "a1"),
        ("A-talk", "a1"),
        ("B-task", "b1"),  # taken: the next intake is not asked, the conversation hears the claim
        ("B-talk:claimed", "b1"),
        ("A-talk", "a2"),  # partials go straight to the conversation
        ("A-task", "a2"),
        ("A-memory", "a2"),
        ("A-talk:claimed", "a2"),
        ("B-task", "b2"),
        ("B-memory", "b2"),
        ("B-talk", "b2"),
    ]


def test_a_speculative_final_an_intake_would_take_never_reaches_the_conversation() -> None:
    log: list[tuple[str, str]] = []
    desk = TranscriptDesk([LogIntake("task", log)], LogListener("talk", log))
    for text, uid in (("take the bins out", "s1"), ("what is that", "s2")):
        desk.route(
            TranscriptSpeculative(
                at=0.0,
                session_id=SESSION,
                speaker_id="1001",
                utterance_id=uid,
                text=text,
                audio_start=0.0,
                audio_end=1.0,
            )
        )
    assert log == [("talk", "s2")]  # asked with claims(), which acts on nothing


def test_a_consumer_that_raises_stops_neither_the_others_nor_later_finals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[tuple[str, str]] = []

    class Broken(LogIntake):
        def offer(self, final: TranscriptFinal) -> bool:
            super().offer(final)
            raise RuntimeError("intake bug")

    class Deaf(LogListener):
        def hear(self, event: Heard) -> None:
            super().hear(event)
            raise RuntimeError("conversation bug")

    desk = TranscriptDesk([Broken("broken", log), LogIntake("task", log)], Deaf("talk", log))
    with caplog.at_level(logging.ERROR):
        desk.route(final("hello", "u1"))
        desk.route(final("take it", "u2"))
        desk.route(final("again", "u3"))
    assert log == [
        ("broken", "u1"),
        ("task", "u1"),
        ("talk", "u1"),
        ("broken", "u2"),
        ("task", "u2"),
        ("talk:claimed", "u2"),
        ("broken", "u3"),
        ("task", "u3"),
        ("talk", "u3"),
    ]
    assert sum("intake Broken failed" in r.message for r in caplog.records) == 3
    assert sum("the conversation failed" in r.message for r in caplog.records) == 2


def test_a_closed_desk_routes_nothing() -> None:
    log: list[tuple[str, str]] = []
    desk = TranscriptDesk([LogIntake("task", log)], LogListener("talk", log))
    desk.close()
    desk.route(final("take it", "u1"))
    desk.route(partial("he", "u2"))
    assert log == []
