"""GPT-Live delegations (docs/adr/0022-gpt-live-engine.md, decision 4): a delegated call of the
semantic action set reaches the broker as a proposal with trusted facts from our state; anything
else is refused without running; a repeated call is answered again, never run twice."""

from __future__ import annotations

import json
from typing import Any, cast

from openai.types.live import DelegationCreatedEvent, ResponseEvent

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.requests import Outcome
from openab_voice.actions.tools import SessionFacts, register_action_tools
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.engine.events import ToolCallHandled
from openab_voice.engine.live import LIVE_TOOLS, Delegations, delegation_config
from openab_voice.tools.registry import ToolContext, default_tools
from openab_voice.tools.router import MemoryAuditLog, ToolRouter
from tests.fakes.sessions import RecordingBroker

FACTS = SessionFacts(guild_id=10, voice_channel_id=20, text_channel_id=30, generation=1, session_id="s-1")


class Rig:
    def __init__(self) -> None:
        self.clock, self.bus = FakeClock(), EventBus()
        self.broker = RecordingBroker(Outcome(ok=True, message="proposed; waiting for the operator"))
        registry = default_tools(self.clock)
        register_action_tools(registry, cast(ActionBroker, self.broker), FACTS)
        self.audit = MemoryAuditLog()
        self.router = ToolRouter(registry, clock=self.clock, audit=self.audit)
        self.sent: list[dict[str, Any]] = []
        self.handled: list[ToolCallHandled] = []
        self.bus.subscribe(ToolCallHandled, self.handled.append)
        self.delegations = Delegations(
            send=self._send,
            tools=self.router,
            bus=self.bus,
            clock=self.clock,
            session_id="s-1",
            context=lambda: ToolContext(session_id="s-1", turn_id="t-3", speaker_id="1001"),
        )

    async def _send(self, event: Any) -> None:
        self.sent.append(dict(event))

    def outputs(self) -> list[dict[str, Any]]:
        return [json.loads(e["item"]["output"]) for e in self.sent if e["type"] == "response.item.create"]


def call_event(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> ResponseEvent:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }
    return ResponseEvent(
        type="response.event",
        event_id="ev_1",
        delegation_id="del_1",
        event={"type": "response.output_item.done", "output_index": 0, "sequence_number": 3, "item": item},
    )


async def test_a_delegated_task_is_a_proposal_with_the_trusted_facts_of_our_turn() -> None:
    rig = Rig()
    taken = await rig.delegations.handle(call_event("start_agent_task", {"goal": "add a readme"}))
    assert taken
    [request] = rig.broker.requests
    assert request.goal == "add a readme"
    assert (request.guild_id, request.text_channel_id, request.voice_session_id) == (10, 30, "s-1")
    assert request.speaker_id == 1001  # ours, from the turn: the model never names who asked
    assert request.call_id == "t-3:call_1"
    assert [e["type"] for e in rig.sent] == ["response.item.create", "response.create"]
    assert rig.sent[0]["item"]["call_id"] == "call_1"
    [output] = rig.outputs()
    assert output == {"ok": True, "message": "proposed; waiting for the operator"}  # the broker's own
    assert [(h.name, h.ok, h.turn_id) for h in rig.handled] == [("start_agent_task", True, "t-3")]
    [audit] = rig.audit.entries  # through the router: budgeted and audited like every engine's calls
    assert (audit.tool, audit.outcome, audit.speaker_id) == ("start_agent_task", "ok", "1001")


async def test_a_function_outside_the_semantic_set_is_refused_without_running() -> None:
    rig = Rig()
    await rig.delegations.handle(call_event("clock_now", {"timezone": "UTC"}))
    await rig.delegations.handle(call_event("shell", {"command": "rm -rf /"}, call_id="call_2"))
    assert rig.broker.requests == [] and not rig.audit.entries  # never reached the router
    assert [o["error"] for o in rig.outputs()] == ["TOOL_UNKNOWN", "TOOL_UNKNOWN"]
    assert "not offered to the live engine" in rig.outputs()[1]["reason"]
    assert [h.ok for h in rig.handled] == [False, False]


async def test_a_repeated_call_is_answered_again_and_run_once() -> None:
    rig = Rig()
    event = call_event("start_agent_task", {"goal": "add a readme"})
    await rig.delegations.handle(event)
    await rig.delegations.handle(event)
    assert len(rig.broker.requests) == 1
    assert len(rig.outputs()) == 2 and rig.outputs()[0] == rig.outputs()[1]


async def test_a_client_delegation_has_no_task_text_and_is_refused_with_a_note() -> None:
    rig = Rig()
    created = DelegationCreatedEvent.model_validate(
        {
            "type": "session.delegation.created",
            "event_id": "ev_2",
            "offset_ms": 1200,
            "delegation": {"id": "del_9", "target": "client", "type": "delegation"},
        }
    )
    assert await rig.delegations.handle(created)
    [note] = rig.sent
    assert note["type"] == "session.thinking.append" and note["delegation_id"] == "del_9"
    assert "Nothing was run" in note["content"]
    assert rig.broker.requests == [] and rig.delegations.refused_delegations == 1


async def test_other_events_are_left_to_the_engine() -> None:
    rig = Rig()
    other = ResponseEvent(type="response.event", event_id="ev_3", event={"type": "response.created"})
    assert await rig.delegations.handle(other)  # a backend frame: taken, nothing to do
    assert rig.sent == []


def test_the_session_offers_the_backend_only_the_semantic_action_set() -> None:
    rig = Rig()
    config = delegation_config(rig.router.specs(), model="gpt-5.1", instructions="Use the tools.")
    names = {tool["name"] for tool in config["responses"]["tools"]}
    assert names == LIVE_TOOLS
    assert config["type"] == "responses" and config["responses"]["parallel_tool_calls"] is False
    # The SDK's own type accepts it.
    from openai.types.live import SessionConfig

    parsed = SessionConfig.model_validate({"model": "gpt-live-1", "delegation": config})
    assert parsed.delegation is not None and parsed.delegation.type == "responses"
