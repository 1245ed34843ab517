"""The live engine on the loopback GPT-Live server, through the real ``openai`` client.

The scenario suite of the cascade and the realtime engine, on GPT-Live: answer (the turn's audio
only, attributed, ended by the mute); barge-in with only heard text committed and the model told what
was heard; false interruption (resumed by the exact voice); the wake-name rule; echo only; a spoken
task through delegation (a pinned proposal, never approved by voice); provider failure ->
recovering -> listening; reconnect after a dropped socket; auth failure and an unknown model at
start-up. The conversation and the server run in virtual time; every wait is on a condition.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openab_voice.actions.tools import register_action_tools
from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.clock import FakeClock
from openab_voice.engine.events import (
    BotUtteranceFinished,
    InterruptionDetected,
    ProviderToldHeard,
    ToolCallHandled,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.response import ToolPath
from openab_voice.engine.state import DialogueState
from openab_voice.jobs import JobStatus
from openab_voice.testing.live import CallFunction, Faults, ScriptedLiveReply
from openab_voice.testing.live.rig import LiveRig
from openab_voice.tools.registry import ToolRegistry
from tests.fakes.actions import FACTS, OPERATOR, plane_rig

pytestmark = pytest.mark.timeout(60)

LONG = "One two three four five six. Seven eight nine ten eleven twelve. Thirteen fourteen fifteen sixteen."


async def test_a_turn_is_its_speakers_audio_attributed_and_ended_by_the_mute() -> None:
    async with LiveRig(replies=["It is noon."]) as rig:
        await rig.until_ready()
        rig.say("what time is it")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "It is noon." and not utt.interrupted
        kinds = [e.type for e in rig.session().client_events]
        # Muted from the start: the model hears nothing but the accepted turn.
        assert kinds[:2] == ["session.start", "session.input_audio.mute"]
        turn = kinds[kinds.index("session.instructions.append") :]
        assert turn[:2] == ["session.instructions.append", "session.input_audio.unmute"]
        assert turn[-1] == "session.input_audio.mute" and "session.input_audio.append" in turn
        note = rig.client_events("session.instructions.append")[-1]
        assert note.content == "Alice says:" and note.delegation_id is None
        sent = rig.client_events("session.input_audio.append")
        audio = np.frombuffer(b"".join(base64.b64decode(e.audio) for e in sent), dtype="<i2")
        assert abs(audio.size - 24_000) <= 480  # her second (all the capture holds), at 24 kHz
        assert rig.context_rows() == [("user", "what time is it"), ("assistant", "It is noon.")]
        assert rig.played_ms() >= 3 * 200
        assert rig.states()[-2:] == ["thinking->speaking", "speaking->listening"]
        started = rig.session().resource
        assert started is not None and started.delegation is not None
        assert started.delegation is not None and started.delegation.type == "responses"


async def test_barge_in_stops_the_output_and_tells_the_model_what_was_heard() -> None:
    async with LiveRig(replies=[LONG], paced=True) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 1500)  # into the second sentence (at 1,200 ms)
        rig.speech_started()
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.events.of(InterruptionDetected)
        utt = rig.utterance("turn-1")
        assert utt is not None and utt.interrupted
        assert utt.spoken_text == "One two three four five six."
        assert rig.context_rows()[-1] == ("assistant", "One two three four five six.")
        [told] = rig.events.of(ProviderToldHeard)
        assert told.heard == "One two three four five six."
        note = rig.client_events("session.instructions.append")[-1].content
        assert 'heard only: "One two three four five six."' in note
        figures = {m.metric: m.value_ms for m in rig.events.of(LatencyMeasured)}
        assert figures["barge_in_ms"] <= 20.0


async def test_what_the_model_says_with_no_answer_in_flight_is_never_played() -> None:
    async with LiveRig(replies=[LONG, "Sure."], paced=True) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 500)
        rig.speech_started()
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        played = rig.played_ms()
        await rig.run(3.0)  # the loopback model goes on speaking until it hears speech: not ours
        assert rig.played_ms() == played
        assert rig.engine.unsolicited > 0


async def test_a_false_interruption_is_resumed_by_the_exact_voice() -> None:
    async with LiveRig(replies=[LONG], paced=True) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 1500)
        rig.speech_started()
        await rig.run(0.1)
        rig.discard()  # a cough: the transcriber found no words
        await rig.until(lambda: len(rig.events.of(BotUtteranceFinished)) == 2)
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.context_rows()[-1][1].startswith("One two three four five six. Seven eight")
        assert any(s.startswith("Seven eight") for s in rig.tts.requested)  # said by our own voice
        rig.say("thanks")
        await rig.until(lambda: len(rig.events.of(BotUtteranceFinished)) == 3)
        notes = [e.content for e in rig.client_events("session.instructions.append")]
        assert any(n.startswith("You (the assistant) just said, in the call: Seven eight") for n in notes)


async def test_with_two_humans_only_a_turn_with_the_wake_name_reaches_the_model() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    async with LiveRig(replies=["Paris."], names=names) as rig:
        await rig.until_ready()
        rig.say("what is the capital of France", speaker="bob")  # not addressed
        await rig.run(1.0)
        assert rig.events.of(TurnIgnored)[-1].reason == "not_addressed"
        assert not rig.client_events("session.input_audio.append")
        rig.say("Jarvis, what is the capital of France", speaker="alice")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "Paris."
        assert rig.client_events("session.instructions.append")[-1].content == "Alice says:"


async def test_echo_alone_reaches_nothing() -> None:
    async with LiveRig(replies=["Paris."]) as rig:
        await rig.until_ready()
        rig.capture.speak("alice", rig.now() - 1.0, 1.0)  # capture with no accepted turn
        await rig.run(2.0)
        assert not rig.client_events("session.input_audio.append")
        assert not rig.events.of(TurnAccepted) and rig.played_ms() == 0


async def test_a_spoken_task_is_a_pinned_proposal_and_never_approved_by_voice(
    db_url: str, tmp_path: Path
) -> None:
    """The real ActionBroker and action tools behind the live session's Responses delegation."""
    goal = json.dumps({"goal": "add a readme to the workspace", "effect_hint": "workspace_write"})
    replies: list[ScriptedLiveReply] = [
        CallFunction(name="start_agent_task", arguments=goal, call_id="call-1"),
        "It is in the text channel for the operator.",
        CallFunction(name="approve_agent_task", arguments="{}", call_id="call-2"),  # not offered
        "I cannot approve it.",
    ]
    operator = str(OPERATOR)
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as plane:
        # The broker's work is real database I/O while the rig drives its virtual clock (as in the
        # realtime engine's test): the clock is held while the broker works.
        proposing, proposed = asyncio.Event(), asyncio.Event()
        propose = plane.broker.propose

        async def gated_propose(request: Any) -> Any:
            proposing.set()
            try:
                return await propose(request)
            finally:
                proposed.set()

        plane.broker.propose = gated_propose  # type: ignore[method-assign]

        def actions(clock: Any) -> ToolPath:
            registry = ToolRegistry(clock)
            register_action_tools(registry, plane.broker, FACTS)
            return registry

        names = {operator: "Alice", "bot": "Jarvis"}
        async with LiveRig(replies=replies, names=names, tools=actions) as rig:
            await rig.until_ready()
            rig.say("start a task: add a readme to the workspace", speaker=operator)
            await rig.until(proposing.is_set)
            async with asyncio.timeout(30):  # real time: a hang guard, never a pacing
                await proposed.wait()
            utt = await rig.until_finished("turn-1")
            assert utt.spoken_text == "It is in the text channel for the operator."
            await plane.log.wait_for("post_proposal")
            [proposal] = plane.channel.proposals()
            outputs = [
                json.loads(e.item["output"] if isinstance(e.item, dict) else e.item.output)
                for e in rig.client_events("response.item.create")
            ]
            assert "action_id" in outputs[0], outputs[0]
            action_id = outputs[0]["action_id"]
            assert outputs[0]["status"] in ("proposed", "delivered")  # the broker's, never "approved"
            rig.say("yes, I approve it, go ahead", speaker=operator)
            await rig.until_finished("turn-2")
            outputs = [
                json.loads(e.item["output"] if isinstance(e.item, dict) else e.item.output)
                for e in rig.client_events("response.item.create")
            ]
            assert outputs[1]["error"] == "TOOL_UNKNOWN"
            job = plane.store.get(action_id)
            assert job is not None and job.status in (JobStatus.PROPOSED, JobStatus.DELIVERED)
            assert proposal.action_id == action_id and "readme" in proposal.goal
            handled = rig.events.of(ToolCallHandled)
            assert [(h.name, h.ok) for h in handled] == [
                ("start_agent_task", True),
                ("approve_agent_task", False),
            ]


async def test_a_failed_answer_goes_recovering_then_listening() -> None:
    faults = Faults()
    async with LiveRig(replies=["Sure."], faults=faults) as rig:
        await rig.until_ready()
        faults.fail_next_response()
        rig.say("hello")
        await rig.until(lambda: bool(rig.events.of(ErrorRaised)))
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        rig.say("hello again")
        utt = await rig.until_finished("turn-2")
        assert utt.spoken_text == "Sure."


async def test_a_dropped_socket_reconnects_to_a_fresh_session_seeded_with_what_was_heard() -> None:
    faults = Faults()
    async with LiveRig(replies=["It is noon.", "Still noon."], faults=faults) as rig:
        await rig.until_ready()
        rig.say("what time is it")
        await rig.until_finished("turn-1")
        await rig.session().drop()
        await rig.until(lambda: "listening->recovering" in rig.states())
        await rig.until(lambda: len(rig.server.sessions) == 2 and rig.engine.ready)
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.states()[-2:] == ["listening->recovering", "recovering->listening"]
        started = rig.session(1).resource
        assert started is not None
        texts = [part.text for item in started.input or [] for part in item.content]
        assert texts[-2:] == ["what time is it", "It is noon."]
        rig.say("and now")
        utt = await rig.until_finished("turn-2")
        assert utt.spoken_text == "Still noon."


async def test_a_drop_mid_answer_discards_it_and_recovers() -> None:
    faults = Faults()
    faults.drop_before("session.output_audio.delta", nth=3)
    async with LiveRig(replies=[LONG, "Back."], faults=faults) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: "recovering" in " ".join(rig.states()))
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING and rig.engine.ready)
        utt = rig.utterance("turn-1")
        assert utt is not None and utt.interrupted and utt.spoken_text == ""
        assert rig.context_rows() == []
        rig.say("are you there")
        assert (await rig.until_finished("turn-2")).spoken_text == "Back."


@pytest.mark.parametrize(
    ("key", "model", "code"),
    [("sk-wrong", "gpt-live-1", "REALTIME_AUTH_FAILED"), ("sk-rig", "gpt-live-9", "REALTIME_MODEL_UNKNOWN")],
)
async def test_a_refused_key_or_an_unknown_model_leaves_the_engine_down(
    key: str, model: str, code: str
) -> None:
    async with LiveRig(replies=["Sure."], key=key, model=model) as rig:
        await rig.until(lambda: rig.engine.failure is not None)
        assert rig.engine.failure is not None and rig.engine.failure.code == code
        assert not rig.engine.failure.retryable and not rig.engine.ready
        assert rig.manager.state is DialogueState.RECOVERING
        assert len(rig.server.sessions) <= 1  # never retried
        rig.say("hello")
        await rig.until(lambda: bool(rig.events.of(TurnIgnored)))
        assert rig.events.of(TurnIgnored)[-1].reason == "recovering"
