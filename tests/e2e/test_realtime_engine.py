"""The realtime engine on the loopback realtime server, through the real ``openai`` client.

The scenario suite of the cascade, on the realtime engine: answer; barge-in with truncation at the
played position and only heard text committed; false interruption; the wake-name rule; a spoken
task through the function call; provider failure -> recovering -> listening; reconnect after a
dropped websocket; auth failure and an unknown model at start-up. The conversation runs in virtual
time; the server answers as fast as it can; every wait is on a condition.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openab_voice.actions.tools import register_action_tools
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.clock import FakeClock
from openab_voice.engine.events import (
    BotUtteranceFinished,
    InterruptionDetected,
    ProviderTruncated,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.response import ToolPath
from openab_voice.engine.state import DialogueState
from openab_voice.jobs import JobStatus
from openab_voice.providers.chat import ToolSpec
from openab_voice.testing.realtime import CallFunction, Faults, Turn
from openab_voice.testing.realtime.responder import ScriptedReply
from openab_voice.testing.realtime.rig import RealtimeRig
from openab_voice.tools.registry import ToolContext, ToolRegistry, ToolResult
from tests.fakes.actions import (
    FACTS,
    OPERATOR,
    plane_rig,
)

pytestmark = pytest.mark.timeout(60)


async def test_a_turn_is_answered_with_turn_detection_off_and_attributed() -> None:
    async with RealtimeRig(replies=["It is noon."]) as rig:
        await rig.until_ready()
        rig.say("what time is it")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "It is noon." and not utt.interrupted
        update = rig.client_events("session.update")[0]
        assert update.session.audio.input.turn_detection is None
        config = rig.session().config.audio
        assert config is not None and config.input is not None and config.input.turn_detection is None
        items = rig.client_events("conversation.item.create")
        assert [c.text for c in items[-1].item.content] == ["Alice says: what time is it"]
        assert len(rig.client_events("response.create")) == 1
        assert rig.context_rows() == [("user", "what time is it"), ("assistant", "It is noon.")]
        assert rig.played_ms() >= 3 * 200  # three words of tone, all played
        assert rig.states()[-2:] == ["thinking->speaking", "speaking->listening"]


LONG = "One two three four five six. Seven eight nine ten eleven twelve. Thirteen fourteen fifteen sixteen."


@pytest.mark.parametrize("paced", [False, True], ids=["streamed", "paced"])
async def test_barge_in_cancels_and_truncates_at_the_played_position(paced: bool) -> None:
    async with RealtimeRig(replies=[LONG], paced=paced) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 1500)  # into the second sentence (at 1,200 ms)
        barged_at = rig.speech_started()
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.events.of(InterruptionDetected)
        heard_ms = rig.played_ms()
        cut = rig.events.of(ProviderTruncated)
        assert len(cut) == 1 and abs(cut[0].audio_end_ms - heard_ms) <= 20
        sent = rig.client_events("conversation.item.truncate")
        assert [(t.item_id, t.audio_end_ms) for t in sent] == [(cut[0].item_id, cut[0].audio_end_ms)]
        # Only heard audio stays in the provider's context ...
        session = rig.session()
        await rig.until(lambda: bool(session.conversation.truncations or session.errors_sent))
        assert session.errors_sent == []
        kept = session.conversation.truncations[0]
        assert kept.audio_end_ms == cut[0].audio_end_ms and kept.audio_ms_before > kept.audio_end_ms
        assert kept.transcript_kept.startswith("One two three four five six. Seven")
        # ... and only the heard sentence in ours.
        utt = rig.utterance("turn-1")
        assert utt is not None and utt.interrupted
        assert utt.spoken_text == "One two three four five six."
        assert rig.context_rows()[-1] == ("assistant", "One two three four five six.")
        cancels = rig.client_events("response.cancel")
        assert len(cancels) == (1 if paced else 0)  # a response that already ended is not cancelled
        figures = {m.metric: m.value_ms for m in rig.events.of(LatencyMeasured)}
        assert figures["truncate_sent_ms"] <= 20.0 and figures["barge_in_ms"] <= 20.0
        assert barged_at <= rig.now()


async def test_a_false_interruption_resumes_through_the_model() -> None:
    async with RealtimeRig(replies=[LONG, "Seven eight nine ten eleven twelve."], paced=True) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 1500)
        rig.speech_started()
        await rig.run(0.1)
        rig.discard()  # a cough: the transcriber found no words
        await rig.until(lambda: len(rig.client_events("response.create")) == 2)
        resume = rig.client_events("response.create")[1]
        assert resume.response.instructions.startswith("Say exactly this, and nothing else: Seven eight")
        await rig.until(
            lambda: rig.utterance("turn-1") is not None and len(rig.events.of(BotUtteranceFinished)) == 2
        )
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.context_rows()[-1][1].startswith("One two three four five six. Seven eight")


async def test_the_wake_name_rule_is_ours_with_two_people() -> None:
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    async with RealtimeRig(replies=["Hello."], names=names) as rig:
        await rig.until_ready()
        rig.say("what time is it", speaker="bob")
        await rig.until(lambda: bool(rig.events.of(TurnIgnored)))
        assert rig.events.of(TurnIgnored)[0].reason == "not_addressed"
        rig.say("Jarvis, what time is it", speaker="alice")
        await rig.until_finished("turn-1")
        users = [e for e in rig.client_events("conversation.item.create") if e.item.role == "user"]
        # Bob's aside went nowhere; Alice's turn went attributed, without the name that addressed it.
        assert [c.text for c in users[-1].item.content] == ["Alice says: What time is it"]
        assert all("Bob" not in c.text for e in users for c in e.item.content)
        assert len(rig.client_events("response.create")) == 1


class _Actions:
    """A tool path standing in for the ActionBroker's tools: records each call and its trusted context."""

    def __init__(self, _clock: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any], ToolContext | None]] = []

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name=n, description=n) for n in ("start_agent_task", "memory_save", "clock_now")]

    async def call(self, call: Any, context: ToolContext | None = None) -> ToolResult:
        self.calls.append((call.name, json.loads(call.arguments), context))
        content = {"action_id": "act-1", "status": "proposed", "note": "posted for the operator to confirm"}
        return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)


def _after_tool(turn: Turn) -> str:
    result = turn.last_tool_result
    return "The proposal is in the text channel." if result is not None else "?"


async def test_a_spoken_task_becomes_a_proposal_through_the_tool_path() -> None:
    args = json.dumps({"goal": "run the tests", "effect_hint": "read_only"})
    replies: list[ScriptedReply] = [
        CallFunction(name="start_agent_task", arguments=args, call_id="call-1"),
        _after_tool,
    ]
    async with RealtimeRig(replies=replies, tools=_Actions) as rig:
        await rig.until_ready()
        update = rig.client_events("session.update")[0]
        assert [t.name for t in update.session.tools] == ["start_agent_task", "clock_now"]
        rig.say("run the tests please")
        utt = await rig.until_finished("turn-1")
        tools = rig.tools
        assert isinstance(tools, _Actions)
        [(name, arguments, context)] = tools.calls
        assert name == "start_agent_task" and arguments["goal"] == "run the tests"
        assert context is not None and context.speaker_id == "alice" and context.turn_id == "turn-1"
        outputs = [
            e.item
            for e in rig.client_events("conversation.item.create")
            if e.item.type == "function_call_output"
        ]
        assert [json.loads(o.output)["status"] for o in outputs] == ["proposed"]  # the broker's status
        assert utt.spoken_text == "The proposal is in the text channel."
        assert "tool_running" in " ".join(rig.states())


async def test_a_tool_outside_the_semantic_set_is_refused_without_running() -> None:
    replies: list[ScriptedReply] = [
        CallFunction(name="memory_save", arguments="{}", call_id="call-2"),
        "Sorry.",
    ]
    async with RealtimeRig(replies=replies, tools=_Actions) as rig:
        await rig.until_ready()
        rig.say("remember my password")
        await rig.until_finished("turn-1")
        tools = rig.tools
        assert isinstance(tools, _Actions) and tools.calls == []
        outputs = [
            e.item
            for e in rig.client_events("conversation.item.create")
            if e.item.type == "function_call_output"
        ]
        assert json.loads(outputs[0].output)["error"] == "TOOL_UNKNOWN"


async def test_a_failed_response_recovers_to_listening() -> None:
    faults = Faults()
    async with RealtimeRig(replies=["Fine."], faults=faults) as rig:
        await rig.until_ready()
        faults.fail_next_response()
        rig.say("hello")
        await rig.until(lambda: "thinking->recovering" in rig.states())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.states()[-1] == "recovering->listening"
        assert any(e.code == "REALTIME_SERVER_ERROR" for e in rig.events.of(ErrorRaised))
        assert rig.context_rows() == []  # a failed response commits nothing
        rig.say("hello again")
        utt = await rig.until_finished("turn-2")
        assert utt.spoken_text == "Fine."


async def test_a_dropped_websocket_reconnects_to_a_fresh_seeded_session() -> None:
    faults = Faults()
    async with RealtimeRig(replies=["It is noon.", "Still noon."], faults=faults) as rig:
        await rig.until_ready()
        rig.say("what time is it")
        await rig.until_finished("turn-1")
        await rig.session().drop()
        await rig.until(lambda: "listening->recovering" in rig.states())
        await rig.until(lambda: len(rig.server.sessions) == 2 and rig.engine.ready)
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert rig.states()[-2:] == ["listening->recovering", "recovering->listening"]
        fresh = [e.item for e in rig.client_events("conversation.item.create", index=1)]
        assert [(i.role, i.content[0].text) for i in fresh] == [
            ("user", "what time is it"),
            ("assistant", "It is noon."),
        ]
        rig.say("and now")
        utt = await rig.until_finished("turn-2")
        assert utt.spoken_text == "Still noon."


async def test_a_drop_mid_response_discards_it_and_recovers() -> None:
    faults = Faults()
    faults.drop_before("response.output_audio.delta", nth=3)
    async with RealtimeRig(replies=[LONG, "Back."], faults=faults) as rig:
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
    [
        ("sk-wrong", "gpt-realtime", "REALTIME_AUTH_FAILED"),
        ("sk-rig", "gpt-nonexistent", "REALTIME_MODEL_UNKNOWN"),
    ],
)
async def test_auth_failure_or_an_unknown_model_is_not_retried(key: str, model: str, code: str) -> None:
    async with RealtimeRig(replies=["Hi."], key=key, model=model) as rig:
        await rig.until(lambda: rig.engine.failure is not None)
        assert rig.engine.failure is not None and rig.engine.failure.code == code
        assert not rig.engine.failure.retryable and not rig.engine.ready
        assert rig.manager.state is DialogueState.RECOVERING
        rig.say("hello")
        await rig.until(lambda: bool(rig.events.of(TurnIgnored)))
        assert rig.events.of(TurnIgnored)[-1].reason == "recovering"
        await rig.run(1.0)
        assert len(rig.server.sessions) <= 1 and not rig.events.of(TurnAccepted)  # never retried


class _Capture:
    """Processed capture as the front end's subscription yields it (frames pushed by the test)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ProcessedFrame] = asyncio.Queue()

    def push(self, speaker: str, at: float, value: int) -> None:
        pcm = np.full(320, value, dtype="<i2").tobytes()  # 20 ms at 16 kHz
        frame = AudioFrame(
            pcm=pcm, sample_rate=16_000, channels=1, timestamp=at, frame_id=0, speaker_id=speaker
        )
        processed = ProcessedFrame(
            frame=frame,
            speech=True,
            user_speech=True,
            speech_probability=0.9,
            bot_speaking=False,
            apm_ok=True,
            degraded=False,
        )
        self.queue.put_nowait(processed)

    async def frames(self) -> AsyncIterator[ProcessedFrame]:
        while True:
            yield await self.queue.get()


async def test_only_the_accepted_speakers_turn_audio_goes_to_the_provider() -> None:
    capture = _Capture()
    names = {"alice": "Alice", "bob": "Bob", "bot": "Jarvis"}
    async with RealtimeRig(replies=["Paris."], names=names, capture=capture.frames) as rig:
        await rig.until_ready()
        now = rig.now()
        for i in range(100):  # two seconds of both talking at once
            at = now - 2.0 + i * 0.02
            capture.push("alice", at, 1000)
            capture.push("bob", at, -1000)
        await rig.run(0.05)
        rig.say("what is the capital of France", speaker="bob")  # not addressed: nothing is sent
        rig.say("Jarvis, what is the capital of France", speaker="alice", began=now - 1.0)
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "Paris."
        sent = rig.client_events("input_audio_buffer.append")
        audio = np.frombuffer(b"".join(base64.b64decode(e.audio) for e in sent), dtype="<i2")
        # Alice's last second plus the lead-in, at 24 kHz; never a sample of Bob's.
        assert abs(audio.size - 1.1 * 24_000) <= 2 * 480
        assert (audio > 0).mean() > 0.98 and not (audio < -500).any()
        assert len(rig.client_events("input_audio_buffer.commit")) == 1
        items = [e.item for e in rig.client_events("conversation.item.create") if e.item.role == "user"]
        assert [c.text for c in items[-1].content] == ["Alice says:"]
        assert bytes(rig.session().input_audio) == b""  # committed into an item, nothing left over


async def test_a_spoken_task_is_pinned_as_a_proposal_and_never_approved_by_voice(
    db_url: str, tmp_path: Path
) -> None:
    """The real ActionBroker and action tools behind the realtime engine's function call."""
    goal = json.dumps({"goal": "add a readme to the workspace", "effect_hint": "workspace_write"})
    replies: list[ScriptedReply] = [
        CallFunction(name="start_agent_task", arguments=goal, call_id="call-1"),
        "It is in the text channel for the operator.",
        CallFunction(name="approve_agent_task", arguments="{}", call_id="call-2"),  # not offered
        "I cannot approve it.",
    ]
    operator = str(OPERATOR)
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as plane:
        # The broker's work is real database I/O, while the rig drives its virtual clock on which
        # the tool's 5 s timeout runs: 5 virtual seconds pass in about 0.15 s, so a proposal that
        # took longer (CI, PostgreSQL under load) came back TOOL_TIMEOUT. The virtual clock is held
        # while the broker works: the rig drives it until the proposal starts, then the test waits
        # for it in real time.
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
        async with RealtimeRig(replies=replies, names=names, tools=actions) as rig:
            await rig.until_ready()
            rig.say("start a task: add a readme to the workspace", speaker=operator)
            await rig.until(proposing.is_set)
            async with asyncio.timeout(30):  # real time: a hang guard, never a pacing
                await proposed.wait()
            await rig.until_finished("turn-1")
            await plane.log.wait_for("post_proposal")
            [proposal] = plane.channel.proposals()
            outputs = [
                json.loads(e.item.output)
                for e in rig.client_events("conversation.item.create")
                if e.item.type == "function_call_output"
            ]
            assert "action_id" in outputs[0], outputs[0]
            action_id = outputs[0]["action_id"]
            assert outputs[0]["status"] in ("proposed", "delivered")
            rig.say("yes, I approve it, go ahead", speaker=operator)
            await rig.until_finished("turn-2")
            outputs = [
                json.loads(e.item.output)
                for e in rig.client_events("conversation.item.create")
                if e.item.type == "function_call_output"
            ]
            assert outputs[1]["error"] == "TOOL_UNKNOWN"
            job = plane.store.get(action_id)
            assert job is not None and job.status in (JobStatus.PROPOSED, JobStatus.DELIVERED)
            assert proposal.action_id == action_id and "readme" in proposal.goal


async def test_a_rate_limit_error_during_a_response_fails_it_and_the_session_goes_on() -> None:
    async with RealtimeRig(replies=[LONG, "Fine."], paced=True) as rig:
        await rig.until_ready()
        rig.say("tell me a story")
        await rig.until(lambda: rig.played_ms() >= 400)
        await rig.session().send_error(
            type="rate_limit_error", code="rate_limit_exceeded", message="Rate limit reached"
        )
        await rig.until(lambda: "speaking->recovering" in rig.states())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        assert "REALTIME_RATE_LIMITED" in [e.code for e in rig.events.of(ErrorRaised)]
        assert rig.context_rows() == []  # the failed response commits nothing
        assert len(rig.client_events("response.cancel")) == 1  # what it still generated is dropped
        rig.say("and now")
        assert (await rig.until_finished("turn-2")).spoken_text == "Fine."
        assert len(rig.server.sessions) == 1  # the same session: an error event is not a drop
